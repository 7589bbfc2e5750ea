// Upgraders for files of older format versions (MegEngine's opdef/functional/tensor-method/module
// loaders): an op loader rewrites one saved op-call expr (its JSON object, docs/file-format.md)
// into the exprs that replace it, so it may change the target or params and insert exprs before it;
// a module loader rewrites a saved module's JSON object (a builtin's config, a traced module's
// attributes). A loader applies to files whose format version is older than `before_version`,
// i.e. the version that changed what it upgrades. The loaded graph is still built through the
// construction API and checked, so a loader cannot produce an inconsistent graph.
#pragma once

#include <tracemod/core/error.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tracemod {

/// Rewrites one saved op-call expr into the exprs that replace it, in order.
using op_loader = std::function<std::vector<nlohmann::json>(nlohmann::json expr)>;
/// Rewrites one saved module in place.
using module_loader = std::function<void(nlohmann::json& module)>;

namespace io::detail {

template <class F>
class loader_table {
 public:
  static loader_table& instance() {
    static loader_table* t = new loader_table;  // never destroyed: loaders may be registered by statics
    return *t;
  }
  void add(std::string key, std::uint32_t before_version, F f) {
    const std::lock_guard lock(mutex_);
    entries_.emplace(std::move(key), std::make_pair(before_version, std::move(f)));
  }
  void remove(std::string_view key) {
    const std::lock_guard lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) it = it->first == key ? entries_.erase(it) : std::next(it);
  }
  /// The loaders for `key` that apply to a file of `version`, in registration order.
  [[nodiscard]] std::vector<F> find(std::string_view key, std::uint32_t version) const {
    const std::lock_guard lock(mutex_);
    std::vector<F> out;
    const auto [first, last] = entries_.equal_range(std::string(key));
    for (auto it = first; it != last; ++it)
      if (version < it->second.first) out.push_back(it->second.second);
    return out;
  }
  [[nodiscard]] bool empty() const {
    const std::lock_guard lock(mutex_);
    return entries_.empty();
  }

 private:
  mutable std::mutex mutex_;
  std::multimap<std::string, std::pair<std::uint32_t, F>, std::less<>> entries_;
};

}  // namespace io::detail

/// Registers an upgrader for the op calls of `target` ("nn.relu", "__add__") in files of format
/// versions older than `before_version`.
inline void register_op_loader(std::string target, std::uint32_t before_version, op_loader f) {
  io::detail::loader_table<op_loader>::instance().add(std::move(target), before_version, std::move(f));
}
/// Registers an upgrader for the modules of type `type_name` ("Conv2d", "ResNet") in files of format
/// versions older than `before_version`.
inline void register_module_loader(std::string type_name, std::uint32_t before_version, module_loader f) {
  io::detail::loader_table<module_loader>::instance().add(std::move(type_name), before_version, std::move(f));
}
/// Removes every upgrader of a target / module type.
inline void remove_op_loaders(std::string_view target) { io::detail::loader_table<op_loader>::instance().remove(target); }
inline void remove_module_loaders(std::string_view type_name) {
  io::detail::loader_table<module_loader>::instance().remove(type_name);
}

}  // namespace tracemod
