// Dropout: in training mode zeroes each element with probability p and scales the others by
// 1 / (1 - p), drawing from tmod::default_generator(); identity in eval mode.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/params.hpp>
#include <tracemod/nn/init.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <string>

namespace tracemod::nn {

class Dropout : public Module {
 public:
  double p = 0.5;

  explicit Dropout(double probability = 0.5) : p(probability) {
    if (!(probability >= 0.0 && probability <= 1.0))
      throw value_error("Dropout: probability " + functional::repr(probability) + " is not in [0, 1]");
  }

  TM_BUILTIN_MODULE(Dropout)
  [[nodiscard]] Value config() const { return Value::dict({{"p", p}}); }
  static Dropout from_config(const Value& c) { return Dropout(config_field<double>(c, "Dropout", "p")); }

  [[nodiscard]] Tensor forward(const Tensor& x) const {
    if (!training() || p == 0.0) return x;
    functional::require_float32("Dropout", "inp", x);
    Tensor y = Tensor::empty(x.shape(), DType::float32, "Dropout");
    const float scale = p == 1.0 ? 0.0f : static_cast<float>(1.0 / (1.0 - p));
    const float* in = x.data<float>();
    float* out = y.data<float>();
    Generator& g = default_generator();
    for (std::int64_t i = 0, n = x.numel(); i < n; ++i)
      out[i] = static_cast<double>(g.uniform()) < p ? 0.0f : in[i] * scale;
    return y;
  }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return x; }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  /// Identity in eval mode; training mode draws random numbers, which an inference graph has not.
  void onnx_export(functional::onnx_export_context& cx, const std::string& path) const {
    if (training() && p != 0.0) cx.refuse("Dropout '" + path + "' is in training mode; call eval() before exporting");
    cx.node("Identity", {cx.input(0).name}, {cx.output()});
  }
  [[nodiscard]] std::string extra_repr() const override { return "p=" + functional::repr(p); }
};
TRACEMOD_BUILTIN_MODULE_CODE(Dropout)

}  // namespace tracemod::nn
