// Pooling modules: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d (PyTorch's argument names and defaults).
#pragma once

#include <tracemod/functional/params.hpp>
#include <tracemod/functional/pooling.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <optional>
#include <string>

namespace tracemod::nn {

/// MaxPool2d's keyword arguments; stride = std::nullopt means stride = kernel_size.
struct MaxPool2dOptions {
  std::optional<functional::pair2> stride{};
  functional::pair2 padding{0};
  functional::pair2 dilation{1};
  bool ceil_mode = false;
};

class MaxPool2d : public Module {
 public:
  functional::max_pool2d_fn::params params;

  explicit MaxPool2d(functional::pair2 kernel_size, const MaxPool2dOptions& o = {})
      : params{kernel_size, o.stride, o.padding, o.dilation, o.ceil_mode} {}

  TM_BUILTIN_MODULE(MaxPool2d)
  [[nodiscard]] Value config() const { return params_config<functional::max_pool2d_fn>(params); }
  static MaxPool2d from_config(const Value& c) {
    MaxPool2d m(1);
    m.params = params_from_config<functional::max_pool2d_fn>(c, "MaxPool2d");
    return m;
  }
  /// How a call commutes with scaling its input (functional/op.hpp): like F::max_pool2d.
  static constexpr functional::scale_rule scaling = functional::scale_rule::positive;

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::max_pool2d_fn::apply(params, x); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return functional::max_pool2d_fn::infer_shape(params, x); }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return functional::max_pool2d_fn::infer_dims(params, x); }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const { return functional::cost_of<functional::max_pool2d_fn>(params, x); }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    functional::max_pool2d_fn::onnx_export(cx, params);
  }
  [[nodiscard]] std::string extra_repr() const override {
    return functional::params_repr<functional::max_pool2d_fn>(params);
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(MaxPool2d)

/// AvgPool2d's keyword arguments; stride = std::nullopt means stride = kernel_size.
struct AvgPool2dOptions {
  std::optional<functional::pair2> stride{};
  functional::pair2 padding{0};
  bool ceil_mode = false;
  bool count_include_pad = true;
};

class AvgPool2d : public Module {
 public:
  functional::avg_pool2d_fn::params params;

  explicit AvgPool2d(functional::pair2 kernel_size, const AvgPool2dOptions& o = {})
      : params{kernel_size, o.stride, o.padding, o.ceil_mode, o.count_include_pad} {}

  TM_BUILTIN_MODULE(AvgPool2d)
  [[nodiscard]] Value config() const { return params_config<functional::avg_pool2d_fn>(params); }
  static AvgPool2d from_config(const Value& c) {
    AvgPool2d m(1);
    m.params = params_from_config<functional::avg_pool2d_fn>(c, "AvgPool2d");
    return m;
  }
  /// How a call commutes with scaling its input (functional/op.hpp): like F::avg_pool2d.
  static constexpr functional::scale_rule scaling = functional::scale_rule::linear;

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::avg_pool2d_fn::apply(params, x); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return functional::avg_pool2d_fn::infer_shape(params, x); }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return functional::avg_pool2d_fn::infer_dims(params, x); }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const { return functional::cost_of<functional::avg_pool2d_fn>(params, x); }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    functional::avg_pool2d_fn::onnx_export(cx, params);
  }
  [[nodiscard]] std::string extra_repr() const override {
    return functional::params_repr<functional::avg_pool2d_fn>(params);
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(AvgPool2d)

/// Averages over PyTorch's adaptive bins to an output of `output_size` (an int or {h, w}).
class AdaptiveAvgPool2d : public Module {
 public:
  functional::pair2 output_size;

  explicit AdaptiveAvgPool2d(functional::pair2 size) : output_size(size) {}

  TM_BUILTIN_MODULE(AdaptiveAvgPool2d)
  [[nodiscard]] Value config() const { return Value::dict({{"output_size", functional::to_value(output_size)}}); }
  static AdaptiveAvgPool2d from_config(const Value& c) {
    return AdaptiveAvgPool2d(config_field<functional::pair2>(c, "AdaptiveAvgPool2d", "output_size"));
  }
  /// How a call commutes with scaling its input (functional/op.hpp): like F::adaptive_avg_pool2d.
  static constexpr functional::scale_rule scaling = functional::scale_rule::linear;

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::adaptive_avg_pool2d(x, output_size); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const {
    return functional::adaptive_avg_pool2d_fn::infer_shape({output_size}, x);
  }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const {
    return functional::adaptive_avg_pool2d_fn::infer_dims({output_size}, x);
  }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const {
    return functional::cost_of<functional::adaptive_avg_pool2d_fn>({output_size}, x);
  }
  [[nodiscard]] std::string extra_repr() const override { return "output_size=" + functional::repr(output_size); }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    functional::adaptive_avg_pool2d_fn::onnx_export(cx, {output_size});
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(AdaptiveAvgPool2d)

}  // namespace tracemod::nn
