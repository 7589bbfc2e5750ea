// StateDict: an insertion-ordered name -> Tensor map (PyTorch's OrderedDict state_dict), and the
// report of a non-strict load_state_dict.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/tensor.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tracemod {

class StateDict {
 public:
  using value_type = std::pair<std::string, Tensor>;
  using const_iterator = std::vector<value_type>::const_iterator;

  StateDict() = default;
  StateDict(std::initializer_list<value_type> items) {
    for (const auto& [key, value] : items) insert(key, value);
  }

  /// Appends a new key; throws module_error if the key is already present.
  void insert(std::string key, Tensor value) {
    if (contains(key)) throw module_error("StateDict.insert: duplicate key '" + key + "'");
    index_.emplace(key, items_.size());
    items_.emplace_back(std::move(key), std::move(value));
  }

  /// Replaces the value of an existing key in place, or appends a new one.
  void insert_or_assign(std::string key, Tensor value) {
    if (const auto it = index_.find(key); it != index_.end())
      items_[it->second].second = std::move(value);
    else
      insert(std::move(key), std::move(value));
  }

  /// Removes a key; returns whether it was present.
  bool erase(std::string_view key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return false;
    const std::size_t position = it->second;
    index_.erase(it);
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(position));
    for (auto& [name, i] : index_)
      if (i > position) --i;
    return true;
  }

  [[nodiscard]] bool contains(std::string_view key) const { return index_.find(key) != index_.end(); }

  /// The tensor stored under `key`; throws module_error naming the key if it is absent.
  [[nodiscard]] const Tensor& at(std::string_view key) const { return items_[position(key)].second; }
  [[nodiscard]] Tensor& at(std::string_view key) { return items_[position(key)].second; }

  [[nodiscard]] std::vector<std::string> keys() const {
    std::vector<std::string> result;
    result.reserve(items_.size());
    for (const auto& item : items_) result.push_back(item.first);
    return result;
  }

  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
  [[nodiscard]] const_iterator begin() const noexcept { return items_.begin(); }
  [[nodiscard]] const_iterator end() const noexcept { return items_.end(); }

 private:
  [[nodiscard]] std::size_t position(std::string_view key) const {
    const auto it = index_.find(key);
    if (it == index_.end()) throw module_error("StateDict: no key '" + std::string(key) + "'");
    return it->second;
  }

  std::vector<value_type> items_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

/// What a non-strict load_state_dict could not load (PyTorch's _IncompatibleKeys, plus the keys
/// whose shape differs, which PyTorch reports as errors).
struct IncompatibleKeys {
  std::vector<std::string> missing_keys;     ///< in the module, not in the dict
  std::vector<std::string> unexpected_keys;  ///< in the dict, not in the module
  std::vector<std::string> mismatched_keys;  ///< in both, with different shapes

  [[nodiscard]] bool empty() const noexcept {
    return missing_keys.empty() && unexpected_keys.empty() && mismatched_keys.empty();
  }
};

}  // namespace tracemod
