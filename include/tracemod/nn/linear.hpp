// Linear: y = x @ weight^T + bias (PyTorch's nn.Linear / MegEngine's M.Linear).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/linalg.hpp>
#include <tracemod/nn/init.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <cstdint>
#include <string>

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

  [[nodiscard]] std::string extra_repr() const override {
    return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
           ", bias=" + (bias.defined() ? "True" : "False");
  }
};

}  // namespace tracemod::nn
