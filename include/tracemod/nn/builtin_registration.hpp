// The registry of builtin modules by type name, filled by the modules themselves: TM_BUILTIN_MODULE
// registers its class before main() runs, from what the class declares about itself (its config,
// from_config, and optionally scaling and tensor_shapes). The serializer saves builtin modules as
// (type name, config, tensors) and rebuilds them on load by type name. User modules made builtin at
// run time (tmod::register_as_builtin) join with builtin_registry::instance().add(...).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/extern_template.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/nn/module.hpp>

#include <concepts>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

namespace tracemod::nn {

/// One builtin module type.
struct builtin_entry {
  std::string type_name;  ///< Module::type_name()
  /// The module's constructor config (hyper-parameters only; tensors are saved separately).
  std::function<Value(const Module&)> config;
  /// A module of this type built from a config. Tensors may be left at any size: the caller replaces
  /// every tensor with the saved one. Throws value_error on a config that does not fit.
  std::function<std::unique_ptr<Module>(const Value&)> make;
  /// How a call commutes with scaling its input, from the module's `scaling` (none if it has none).
  functional::scale_rule scaling = functional::scale_rule::none;
  /// The shape each named tensor must have for the module's config (load checks the saved tensors
  /// against it); empty for modules whose tensors the config does not size.
  std::function<std::vector<std::pair<std::string, Shape>>(const Module&)> tensor_shapes;
  /// The module's ONNX export rule (functional/onnx_rule.hpp), from its `onnx_export` member; null
  /// for a module without an ONNX equivalent. `path` is the module's attribute path.
  std::function<void(functional::onnx_export_context&, const Module&, const std::string& path)> onnx_export;
};

class builtin_registry {
 public:
  static builtin_registry& instance() {
    static builtin_registry* r = new builtin_registry;  // never destroyed, like the op registry
    return *r;
  }
  [[nodiscard]] const builtin_entry* find(std::string_view type_name) const {
    const std::lock_guard lock(mutex_);
    return find_locked(type_name);
  }
  /// Every registered type name, in registration order.
  [[nodiscard]] std::vector<std::string> type_names() const {
    const std::lock_guard lock(mutex_);
    std::vector<std::string> v;
    for (const auto& e : entries_) v.push_back(e->type_name);
    return v;
  }
  /// Adds a type; throws value_error if the name is taken.
  const builtin_entry& add(builtin_entry e) {
    const std::lock_guard lock(mutex_);
    if (find_locked(e.type_name) != nullptr)
      throw value_error("builtin module '" + e.type_name + "' is already registered");
    entries_.push_back(std::make_unique<builtin_entry>(std::move(e)));
    return *entries_.back();
  }
  /// Adds a type declared by TM_BUILTIN_MODULE, before main() (where throwing would terminate). A
  /// second class of the same type name makes the name ambiguous in saved files: saving or loading
  /// a module of that name then throws module_error naming both classes.
  void declare(builtin_entry e, const std::type_info& type) {
    const std::lock_guard lock(mutex_);
    builtin_entry* taken = find_locked(e.type_name);
    if (taken == nullptr) {
      entries_.push_back(std::make_unique<builtin_entry>(std::move(e)));
      return;
    }
    const std::string why = "builtin module type name '" + e.type_name + "' is declared by two classes (" +
                            type.name() + " and another); rename one of them";
    taken->config = [why](const Module&) -> Value { throw module_error(why); };
    taken->make = [why](const Value&) -> std::unique_ptr<Module> { throw module_error(why); };
  }

 private:
  builtin_registry() = default;
  builtin_entry* find_locked(std::string_view type_name) const {
    for (const auto& e : entries_)
      if (e->type_name == type_name) return e.get();
    return nullptr;
  }
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<builtin_entry>> entries_;
};

/// What a builtin module declares so that save and load can rebuild it: its constructor's
/// hyper-parameters as a Value dict, and the module a config describes.
template <class M>
concept describes_config = requires(const M& m, const Value& c) {
  { m.config() } -> std::same_as<Value>;
  { M::from_config(c) } -> std::same_as<M>;
};

namespace detail {

/// M's registry entry, from what M declares.
template <class M>
builtin_entry describe_builtin() {
  static_assert(describes_config<M>,
                "TM_BUILTIN_MODULE: a builtin module class must declare `tmod::Value config() const` (its "
                "constructor's hyper-parameters as a dict) and `static Class from_config(const tmod::Value&)` "
                "(the module a config describes), so that save and load can rebuild it");
  builtin_entry e;
  if constexpr (describes_config<M>) {
    e.type_name = std::string(M::tracemod_type_name);
    e.config = +[](const Module& m) {
      const auto* typed = dynamic_cast<const M*>(&m);
      if (typed == nullptr)
        throw module_error("builtin registry: a " + std::string(m.type_name()) + " is no " +
                           std::string(M::tracemod_type_name));
      return typed->config();
    };
    e.make = +[](const Value& c) -> std::unique_ptr<Module> { return std::make_unique<M>(M::from_config(c)); };
    if constexpr (requires { M::scaling; }) e.scaling = M::scaling;
    if constexpr (requires(const M& m) { m.tensor_shapes(); })
      e.tensor_shapes = +[](const Module& m) { return dynamic_cast<const M&>(m).tensor_shapes(); };
    if constexpr (requires(const M& m, functional::onnx_export_context& cx) { m.onnx_export(cx, std::string()); })
      e.onnx_export = +[](functional::onnx_export_context& cx, const Module& m, const std::string& path) {
        dynamic_cast<const M&>(m).onnx_export(cx, path);
      };
  }
  return e;
}

/// TM_BUILTIN_MODULE's static member: constructing it registers M. Its constructor is instantiated
/// after M is complete, so the check of what M declares sees the whole class.
template <class M>
struct builtin_registration {
  builtin_registration() { builtin_registry::instance().declare(describe_builtin<M>(), typeid(M)); }
};

}  // namespace detail

/// After each of the library's builtin module classes, at namespace scope in tracemod::nn: the code
/// of its registry entry (its config, factory and ONNX rule reached through describe_builtin) is
/// compiled once in a program that compiles the library separately (core/extern_template.hpp), in
/// the unit that includes <tracemod/instantiate.hpp>, as TRACEMOD_REGISTER_BUILTIN_OP does for ops.
#if defined(TRACEMOD_INSTANTIATE_TEMPLATES)
#define TRACEMOD_BUILTIN_MODULE_CODE(Class) template builtin_entry detail::describe_builtin<Class>();
#else
#define TRACEMOD_BUILTIN_MODULE_CODE(Class) TRACEMOD_EXTERN_TEMPLATE(builtin_entry detail::describe_builtin<Class>())
#endif

}  // namespace tracemod::nn
