// Linear: y = x @ weight^T + bias (PyTorch's nn.Linear / MegEngine's M.Linear).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/linalg.hpp>
#include <tracemod/nn/init.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tracemod::nn {

class Linear : public Module {
 public:
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
  Parameter weight;  ///< (out_features, in_features)
  Parameter bias;    ///< (out_features,); undefined when constructed with bias = false

  /// Linear(in_features, out_features, bias = true), initialised as PyTorch does.
  Linear(std::int64_t in, std::int64_t out, bool has_bias = true) : in_features(in), out_features(out) {
    if (in < 0 || out < 0)
      throw value_error("Linear: in_features (" + std::to_string(in) + ") and out_features (" + std::to_string(out) +
                        ") must be non-negative");
    weight = Tensor::empty({out, in}, DType::float32, "Linear");
    if (has_bias) bias = Tensor::empty({out}, DType::float32, "Linear");
    init::default_layer_init_(weight, bias);
  }

  TM_BUILTIN_MODULE(Linear, weight, bias)

  [[nodiscard]] Value config() const {
    return Value::dict({{"in_features", in_features}, {"out_features", out_features}, {"bias", bias.defined()}});
  }
  /// The Linear a config describes, its tensors at placeholder size (load assigns the saved ones and
  /// checks them against tensor_shapes()), so a config allocates nothing of the size it states.
  static Linear from_config(const Value& c) {
    Linear m(1, 1, config_field<bool>(c, "Linear", "bias"));
    m.in_features = config_field<std::int64_t>(c, "Linear", "in_features");
    m.out_features = config_field<std::int64_t>(c, "Linear", "out_features");
    if (m.in_features < 0 || m.out_features < 0) throw value_error("Linear: negative feature count");
    return m;
  }
  [[nodiscard]] tensor_shape_list tensor_shapes() const {
    tensor_shape_list v{{"weight", Shape{out_features, in_features}}};
    if (bias.defined()) v.emplace_back("bias", Shape{out_features});
    return v;
  }

  [[nodiscard]] Tensor forward(const Tensor& x) const {
    return bias.defined() ? functional::linear(x, weight, bias) : functional::linear(x, weight);
  }

  [[nodiscard]] Shape infer_shape(const Shape& x) const {
    const Shape b = bias.defined() ? bias.shape() : Shape{};
    return functional::linear_fn::infer_shape({}, x, weight.shape(), bias.defined() ? &b : nullptr);
  }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const {
    return functional::linear_fn::infer_dims({}, x, {to_dims(weight.shape()), weight.shape()}, nullptr);
  }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const {
    const Shape b = bias.defined() ? bias.shape() : Shape{};
    return functional::cost_of<functional::linear_fn>({}, x, weight.shape(), bias.defined() ? &b : nullptr);
  }

  /// F::linear's rule, the tensors written as initializers named by `path`.
  void onnx_export(functional::onnx_export_context& cx, const std::string& path) const {
    using functional::onnx_operand;
    std::vector<onnx_operand> in{cx.input(0), onnx_operand::tensor(cx.graph().weight(weight, path + ".weight"), weight.shape())};
    in.push_back(bias.defined() ? onnx_operand::tensor(cx.graph().weight(bias, path + ".bias"), bias.shape()) : onnx_operand{});
    functional::onnx_export_context linear = cx.with(cx.sub_call(std::move(in), cx.output()));
    functional::linear_fn::onnx_export(linear, {});
  }

  [[nodiscard]] std::string extra_repr() const override {
    return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
           ", bias=" + (bias.defined() ? "True" : "False");
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(Linear)

}  // namespace tracemod::nn
