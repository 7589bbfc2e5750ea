// Activation modules: ReLU, ReLU6, and PyTorch's GELU, SiLU, Hardswish, Hardsigmoid and LeakyReLU.
#pragma once

#include <tracemod/core/value.hpp>
#include <tracemod/functional/activations.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/functional/params.hpp>
#include <tracemod/nn/module_config.hpp>
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

/// x * sigmoid(x)
class SiLU : public Module {
 public:
  SiLU() = default;
  TM_BUILTIN_MODULE(SiLU)
  [[nodiscard]] Value config() const { return Value::dict({}); }
  static SiLU from_config(const Value&) { return {}; }

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::silu(x); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return x; }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const { return functional::cost_of<functional::silu_fn>({}, x); }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    functional::silu_fn::onnx_export(cx, {});
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(SiLU)

/// x * relu6(x + 3) / 6
class Hardswish : public Module {
 public:
  Hardswish() = default;
  TM_BUILTIN_MODULE(Hardswish)
  [[nodiscard]] Value config() const { return Value::dict({}); }
  static Hardswish from_config(const Value&) { return {}; }

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::hardswish(x); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return x; }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const { return functional::cost_of<functional::hardswish_fn>({}, x); }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    functional::hardswish_fn::onnx_export(cx, {});
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(Hardswish)

/// relu6(x + 3) / 6
class Hardsigmoid : public Module {
 public:
  Hardsigmoid() = default;
  TM_BUILTIN_MODULE(Hardsigmoid)
  [[nodiscard]] Value config() const { return Value::dict({}); }
  static Hardsigmoid from_config(const Value&) { return {}; }

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::hardsigmoid(x); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return x; }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const { return functional::cost_of<functional::hardsigmoid_fn>({}, x); }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    functional::hardsigmoid_fn::onnx_export(cx, {});
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(Hardsigmoid)

/// x/2 (1 + erf(x / sqrt 2)), or its tanh approximation: GELU(approximate = "none" | "tanh").
class GELU : public Module {
 public:
  functional::gelu_fn::params params;

  explicit GELU(std::string approximate = "none") : params{std::move(approximate)} {
    (void)functional::gelu_fn::tanh_form(params);
  }
  TM_BUILTIN_MODULE(GELU)
  [[nodiscard]] Value config() const { return params_config<functional::gelu_fn>(params); }
  static GELU from_config(const Value& c) { return GELU(params_from_config<functional::gelu_fn>(c, "GELU").approximate); }

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::gelu(x, params); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return x; }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const { return functional::cost_of<functional::gelu_fn>(params, x); }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    functional::gelu_fn::onnx_export(cx, params);
  }
  [[nodiscard]] std::string extra_repr() const override { return functional::params_repr<functional::gelu_fn>(params); }
};
TRACEMOD_BUILTIN_MODULE_CODE(GELU)

/// x > 0 ? x : negative_slope * x: LeakyReLU(negative_slope = 0.01).
class LeakyReLU : public Module {
 public:
  double negative_slope = functional::leaky_relu_fn::default_slope;

  explicit LeakyReLU(double slope = functional::leaky_relu_fn::default_slope) : negative_slope(slope) {}
  TM_BUILTIN_MODULE(LeakyReLU)
  [[nodiscard]] Value config() const { return Value::dict({{"negative_slope", negative_slope}}); }
  static LeakyReLU from_config(const Value& c) {
    return LeakyReLU(config_field<double>(c, "LeakyReLU", "negative_slope"));
  }

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::leaky_relu(x, negative_slope); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return x; }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const {
    return functional::cost_of<functional::leaky_relu_fn>({}, x, Shape{});
  }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    cx.node("LeakyRelu", {cx.input(0).name}, {cx.output()}, {{"alpha", negative_slope}});
  }
  [[nodiscard]] std::string extra_repr() const override { return "negative_slope=" + functional::repr(negative_slope); }
};
TRACEMOD_BUILTIN_MODULE_CODE(LeakyReLU)

}  // namespace tracemod::nn
