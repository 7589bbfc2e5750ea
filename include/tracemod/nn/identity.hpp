// Identity: returns its input (a placeholder that keeps a module slot, e.g. after fusing a bn away).
#pragma once

#include <tracemod/core/value.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/nn/reflection.hpp>

#include <string>

namespace tracemod::nn {

class Identity : public Module {
 public:
  Identity() = default;
  TM_BUILTIN_MODULE(Identity)
  [[nodiscard]] Value config() const { return Value::dict({}); }
  static Identity from_config(const Value&) { return {}; }
  /// How a call commutes with scaling its input (functional/op.hpp): returns its input.
  static constexpr functional::scale_rule scaling = functional::scale_rule::linear;

  [[nodiscard]] Tensor forward(const Tensor& x) const { return x; }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return x; }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    cx.node("Identity", {cx.input(0).name}, {cx.output()});
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(Identity)

}  // namespace tracemod::nn
