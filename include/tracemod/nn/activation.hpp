// Activation modules.
#pragma once

#include <tracemod/core/value.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/nn/reflection.hpp>

#include <string>

namespace tracemod::nn {

/// max(x, 0)
class ReLU : public Module {
 public:
  ReLU() = default;
  TM_BUILTIN_MODULE(ReLU)
  [[nodiscard]] Value config() const { return Value::dict({}); }
  static ReLU from_config(const Value&) { return {}; }
  /// How a call commutes with scaling its input (functional/op.hpp): like F::relu.
  static constexpr functional::scale_rule scaling = functional::scale_rule::positive;

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::relu(x); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return x; }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const { return functional::cost_of<functional::relu_fn>({}, x); }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    functional::relu_fn::onnx_export(cx, {});
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(ReLU)

/// min(max(x, 0), 6)
class ReLU6 : public Module {
 public:
  ReLU6() = default;
  TM_BUILTIN_MODULE(ReLU6)
  [[nodiscard]] Value config() const { return Value::dict({}); }
  static ReLU6 from_config(const Value&) { return {}; }

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::relu6(x); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return x; }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const { return functional::cost_of<functional::relu6_fn>({}, x); }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    functional::relu6_fn::onnx_export(cx, {});
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(ReLU6)

}  // namespace tracemod::nn
