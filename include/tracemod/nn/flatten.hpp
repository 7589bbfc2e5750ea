// Flatten: merges axes start_axis..end_axis (PyTorch's nn.Flatten defaults: from axis 1 to the last).
#pragma once

#include <tracemod/functional/shape_ops.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <cstdint>
#include <string>

namespace tracemod::nn {

class Flatten : public Module {
 public:
  functional::flatten_fn::params params;

  explicit Flatten(std::int64_t start_axis = 1, std::int64_t end_axis = -1) : params{start_axis, end_axis} {}

  TM_BUILTIN_MODULE(Flatten)
  [[nodiscard]] Value config() const { return params_config<functional::flatten_fn>(params); }
  static Flatten from_config(const Value& c) {
    Flatten m;
    m.params = params_from_config<functional::flatten_fn>(c, "Flatten");
    return m;
  }
  /// How a call commutes with scaling its input (functional/op.hpp): like F::flatten.
  static constexpr functional::scale_rule scaling = functional::scale_rule::linear;

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::flatten(x, params); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return functional::flatten_fn::infer_shape(params, x); }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return functional::flatten_fn::infer_dims(params, x); }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const { return functional::cost_of<functional::flatten_fn>(params, x); }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    functional::flatten_fn::onnx_export(cx, params);
  }
  [[nodiscard]] std::string extra_repr() const override {
    return functional::params_repr<functional::flatten_fn>(params);
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(Flatten)

}  // namespace tracemod::nn
