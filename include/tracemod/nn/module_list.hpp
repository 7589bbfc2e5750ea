// ModuleList<T>: a run-time sized list of modules of one class, children named "0", "1", ...
// (PyTorch's nn.ModuleList). It has no forward: a parent's forward loops over it. Not builtin.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/nn/reflection.hpp>

#include <boost/hana/tuple.hpp>

#include <cstddef>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace tracemod::nn {

template <class T>
class ModuleList : public Module {
  static_assert(reflected_module<T>, "tmod::nn::ModuleList<T>: T must be a module class that declares TM_MODULE");

 public:
  using value_type = T;
  using iterator = typename std::vector<T>::iterator;
  using const_iterator = typename std::vector<T>::const_iterator;

  ModuleList() = default;
  ModuleList(std::initializer_list<T> modules) : items_(modules) {}
  explicit ModuleList(std::vector<T> modules) : items_(std::move(modules)) {}

  /// No members known at compile time: the elements are run-time children.
  static constexpr auto tracemod_members() { return boost::hana::tuple<>{}; }
  TRACEMOD_DETAIL_MODULE_BASICS(ModuleList, "ModuleList", false)

  void append(T module) { items_.push_back(std::move(module)); }
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }

  [[nodiscard]] T& operator[](std::size_t i) noexcept { return items_[i]; }
  [[nodiscard]] const T& operator[](std::size_t i) const noexcept { return items_[i]; }
  /// Bounds-checked access; throws module_error.
  [[nodiscard]] T& at(std::size_t i) { return items_[checked(i)]; }
  [[nodiscard]] const T& at(std::size_t i) const { return items_[checked(i)]; }

  [[nodiscard]] iterator begin() noexcept { return items_.begin(); }
  [[nodiscard]] iterator end() noexcept { return items_.end(); }
  [[nodiscard]] const_iterator begin() const noexcept { return items_.begin(); }
  [[nodiscard]] const_iterator end() const noexcept { return items_.end(); }

 private:
  void tracemod_members_(std::vector<tracemod::detail::member_slot>& out) const override {
    for (std::size_t i = 0; i < items_.size(); ++i)
      out.push_back({std::to_string(i), member_kind::module, const_cast<T*>(&items_[i]), nullptr, true});
  }

  [[nodiscard]] std::size_t checked(std::size_t i) const {
    if (i >= items_.size())
      throw module_error("ModuleList.at: index " + std::to_string(i) + " is out of range for " +
                         std::to_string(items_.size()) + " modules");
    return i;
  }

  std::vector<T> items_;
};

}  // namespace tracemod::nn
