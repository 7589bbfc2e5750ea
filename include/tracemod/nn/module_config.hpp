// Helpers for a builtin module's description of itself: its config (constructor hyper-parameters
// as a Value dict) read back field by field, an op's params struct as a config, and the tensor
// shapes a config implies.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/param_value.hpp>

#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod::nn {

/// The shape each named tensor of a module must have for its config (load checks saved tensors
/// against it).
using tensor_shape_list = std::vector<std::pair<std::string, Shape>>;

/// Field `field` of a module's config, or value_error naming the module and the field.
[[nodiscard]] inline const Value& config_entry(const Value& config, std::string_view module, std::string_view field) {
  if (config.kind() != Value::Kind::dict)
    throw value_error(std::string(module) + ": the config must be a dict, got " + config.repr());
  for (const auto& [key, v] : config.dict_items())
    if (key == field) return v;
  throw value_error(std::string(module) + ": the config has no field '" + std::string(field) + "'");
}

/// Field `field` of a module's config as type T, or value_error naming the module and the field.
template <class T>
[[nodiscard]] T config_field(const Value& config, std::string_view module, std::string_view field) {
  return functional::from_value<T>(config_entry(config, module, field), module, field);
}

/// An op's params struct as a config dict (the op's own field names, in its order).
template <class Op>
[[nodiscard]] Value params_config(const typename Op::params& p) {
  ValueDict d;
  functional::for_each_param<Op>(p, [&](std::string_view name, const auto& v, bool) {
    d.emplace_back(std::string(name), functional::to_value(v));
  });
  return Value::dict(std::move(d));
}

/// The op's params struct from a config dict written by params_config.
template <class Op>
[[nodiscard]] typename Op::params params_from_config(const Value& config, std::string_view module) {
  typename Op::params p{};
  std::apply(
      [&](const auto&... f) {
        ((p.*(f.member) = config_field<std::remove_cvref_t<decltype(p.*(f.member))>>(config, module, f.name)), ...);
      },
      Op::fields);
  return p;
}

/// `shapes` with each name prefixed by `prefix` (a child module's tensors under its attribute name).
[[nodiscard]] inline tensor_shape_list prefixed(tensor_shape_list shapes, std::string_view prefix) {
  for (auto& [name, shape] : shapes) name.insert(0, prefix);
  return shapes;
}

}  // namespace tracemod::nn
