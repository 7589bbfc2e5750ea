// Upsample: PyTorch's nn.Upsample, a module form of F::interpolate with no parameters or state.
#pragma once

#include <tracemod/functional/interpolate.hpp>
#include <tracemod/functional/params.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <optional>
#include <string>
#include <utility>

namespace tracemod::nn {

/// Resizes H and W of an NCHW input: `M::Upsample({.scale_factor = 2.0, .mode = "bilinear"})` or
/// `M::Upsample({24, 32})` (an output size). Its arguments are F::interpolate's.
class Upsample : public Module {
 public:
  functional::interpolate_params params;

  explicit Upsample(functional::interpolate_params p = {}) : params(std::move(p)) {}
  explicit Upsample(functional::pair2 size, std::string mode = "nearest", std::optional<bool> align_corners = std::nullopt)
      : params{size, std::nullopt, std::move(mode), align_corners} {}

  TM_BUILTIN_MODULE(Upsample)
  [[nodiscard]] Value config() const { return params_config<functional::interpolate_fn>(params); }
  static Upsample from_config(const Value& c) {
    return Upsample(params_from_config<functional::interpolate_fn>(c, "Upsample"));
  }
  /// How a call commutes with scaling its input (functional/op.hpp): like F::interpolate.
  static constexpr functional::scale_rule scaling = functional::scale_rule::linear;

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::interpolate_fn::apply(params, x); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return functional::interpolate_fn::infer_shape(params, x); }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return functional::interpolate_fn::infer_dims(params, x); }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const {
    return functional::cost_of<functional::interpolate_fn>(params, x);
  }
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    functional::interpolate_fn::onnx_export(cx, params);
  }
  /// PyTorch's: the size or the scale factor given, the mode, and align_corners when given.
  [[nodiscard]] std::string extra_repr() const override {
    std::string s = params.scale_factor ? "scale_factor=" + functional::repr(*params.scale_factor)
                                        : "size=" + functional::repr(params.size);
    s += ", mode=" + params.mode;
    if (params.align_corners) s += ", align_corners=" + functional::repr(*params.align_corners);
    return s;
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(Upsample)

}  // namespace tracemod::nn
