// fake_quantize and fake_quantize_per_channel: PyTorch's torch.fake_quantize_per_tensor_affine and
// torch.fake_quantize_per_channel_affine (MegEngine's fake_quant_tensor). Each element is quantized
// to the integer grid of [quant_min, quant_max] and mapped back to float32:
//   q = clamp(nearbyint(x * (1 / scale)) + zero_point, quant_min, quant_max)
//   y = (q - zero_point) * scale
// in float32 with the reciprocal of the scale taken once, as PyTorch's CPU kernels compute it (so the
// bits match theirs); nearbyint rounds half to even. ONNX: QuantizeLinear then DequantizeLinear
// (export only; see docs/onnx.md for the ranges it can state).
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace tracemod::kernels {

/// y[i] = fake quantization of x[i] with one scale and zero point (n elements).
inline void fake_quantize(const float* x, std::size_t n, float scale, std::int64_t zero_point, std::int64_t quant_min,
                          std::int64_t quant_max, float* y) {
  const float inv_scale = 1.0f / scale;
  const auto zp = static_cast<float>(zero_point), lo = static_cast<float>(quant_min), hi = static_cast<float>(quant_max);
  for (std::size_t i = 0; i < n; ++i) {
    // Exact integer arithmetic in float (every integer involved is far below 2^24); adding and
    // removing the zero point turns nearbyint's -0 into +0, as PyTorch's int64 levels are. NaN stays NaN.
    const float r = std::nearbyint(x[i] * inv_scale) + zp;
    const float q = r < lo ? lo : (r > hi ? hi : r);
    y[i] = (q - zp) * scale;
  }
}

}  // namespace tracemod::kernels

namespace tracemod::functional {

/// Rejects quant_min >= quant_max, naming the op.
inline void check_fake_quantize_range(std::string_view op, std::int64_t quant_min, std::int64_t quant_max) {
  if (quant_min >= quant_max)
    throw value_error(std::string(op) + ": quant_min " + std::to_string(quant_min) + " must be below quant_max " +
                      std::to_string(quant_max));
}
/// Rejects a scale that is not positive and finite, or a zero point outside [quant_min, quant_max],
/// naming the op and, for a channel, `where` ("[2]").
inline void check_fake_quantize_qparams(std::string_view op, const std::string& where, double scale, std::int64_t zero_point,
                                        std::int64_t quant_min, std::int64_t quant_max) {
  if (!(scale > 0) || !std::isfinite(scale))
    throw value_error(std::string(op) + ": scale" + where + " is " + repr_real(scale) + ", but must be positive and finite");
  if (zero_point < quant_min || zero_point > quant_max)
    throw value_error(std::string(op) + ": zero_point" + where + " is " + std::to_string(zero_point) + ", outside [" +
                      std::to_string(quant_min) + ", " + std::to_string(quant_max) + "]");
}

/// The ONNX zero-point type a quantization range can be stated with: QuantizeLinear saturates to the
/// whole int8 or uint8 range, so only those two ranges export.
inline bool onnx_zero_point_unsigned(onnx_export_context& cx, std::int64_t quant_min, std::int64_t quant_max) {
  if (quant_min == -128 && quant_max == 127) return false;
  if (quant_min == 0 && quant_max == 255) return true;
  cx.refuse("fake quantization to [" + std::to_string(quant_min) + ", " + std::to_string(quant_max) +
            "]: QuantizeLinear saturates to [-128, 127] (int8) or [0, 255] (uint8) only");
}

struct fake_quantize_params {
  double scale = 1;  ///< used in float32, as PyTorch
  std::int64_t zero_point = 0;
  std::int64_t quant_min = -128;
  std::int64_t quant_max = 127;
};

/// Fake quantization with one scale and zero point for the whole tensor.
struct fake_quantize_fn : op_base<fake_quantize_fn> {
  static constexpr std::string_view name = "fake_quantize";
  static constexpr std::string_view target = "nn.fake_quantize";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = fake_quantize_params;
  static constexpr std::tuple fields{required("scale", &params::scale), required("zero_point", &params::zero_point),
                                     required("quant_min", &params::quant_min),
                                     required("quant_max", &params::quant_max)};

  static void check(const params& p) {
    check_fake_quantize_range(target, p.quant_min, p.quant_max);
    check_fake_quantize_qparams(target, "", static_cast<float>(p.scale), p.zero_point, p.quant_min, p.quant_max);
  }
  static Shape infer_shape(const params& p, const Shape& x) {
    check(p);
    return x;
  }
  static Dims infer_dims(const params&, const ShapeDims& x) { return x.dims; }
  /// A multiply, a round, two compares and a multiply per element.
  static constexpr op_cost cost(const params&, const Shape& x, const Shape&) { return {.flops = 5 * x.numel()}; }

  static Tensor eager(const params& p, const Tensor& x) {
    require_float32(target, "inp", x);
    check(p);
    Tensor y = Tensor::empty(x.shape(), DType::float32, target);
    kernels::fake_quantize(x.data<float>(), static_cast<std::size_t>(x.numel()), static_cast<float>(p.scale), p.zero_point,
                           p.quant_min, p.quant_max, y.data<float>());
    return y;
  }

  /// QuantizeLinear (to int8 or uint8, by the zero point's type) then DequantizeLinear.
  static void onnx_export(onnx_export_context& cx, const params& p) {
    const bool is_unsigned = onnx_zero_point_unsigned(cx, p.quant_min, p.quant_max);
    const std::string scale = cx.graph().scalar(static_cast<float>(p.scale));
    const std::string zero_point = cx.graph().zero_point(p.zero_point, is_unsigned);
    const std::string q = cx.node1("QuantizeLinear", {cx.input(0).name, scale, zero_point}, cx.fresh("quantized"));
    cx.node("DequantizeLinear", {q, scale, zero_point}, {cx.output()});
  }
};
inline constexpr fake_quantize_fn fake_quantize{};
TRACEMOD_REGISTER_BUILTIN_OP(fake_quantize_fn);

struct fake_quantize_per_channel_params {
  std::int64_t axis = 0;  ///< the channel axis; negative counts from the end
  std::int64_t quant_min = -128;
  std::int64_t quant_max = 127;
};

/// Fake quantization with a scale (float32) and a zero point (int32) per index of `axis`: both are
/// tensors of shape (x.shape[axis],).
struct fake_quantize_per_channel_fn : op_base<fake_quantize_per_channel_fn> {
  static constexpr std::string_view name = "fake_quantize_per_channel";
  static constexpr std::string_view target = "nn.fake_quantize_per_channel";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}, operand{"scale", operand_kind::tensor},
                                       operand{"zero_point", operand_kind::tensor}};
  using params = fake_quantize_per_channel_params;
  static constexpr std::tuple fields{required("axis", &params::axis), required("quant_min", &params::quant_min),
                                     required("quant_max", &params::quant_max)};

  static std::size_t channel_axis(const params& p, const Shape& x) {
    const auto r = static_cast<std::int64_t>(x.rank());
    if (p.axis < -r || p.axis >= r)
      throw shape_error(std::string(target) + ": axis " + std::to_string(p.axis) + " is out of range for an input of shape " +
                        x.to_string());
    return static_cast<std::size_t>(p.axis < 0 ? p.axis + r : p.axis);
  }
  static Shape infer_shape(const params& p, const Shape& x, const Shape& scale, const Shape& zero_point) {
    check_fake_quantize_range(target, p.quant_min, p.quant_max);
    const std::int64_t c = x[channel_axis(p, x)];
    for (const auto& [what, s] : {std::pair{"scale", &scale}, std::pair{"zero_point", &zero_point}})
      if (*s != Shape{c})
        throw shape_error(std::string(target) + ": " + what + " has shape " + s->to_string() + ", but an input of shape " +
                          x.to_string() + " has " + std::to_string(c) + " channels on axis " + std::to_string(p.axis) +
                          ": it must be (" + std::to_string(c) + ",)");
    return x;
  }
  static Dims infer_dims(const params&, const ShapeDims& x, const ShapeDims&, const ShapeDims&) { return x.dims; }
  static constexpr op_cost cost(const params&, const Shape& x, const Shape&, const Shape&, const Shape&) {
    return {.flops = 5 * x.numel()};
  }

  static Tensor eager(const params& p, const Tensor& x, const Tensor& scale, const Tensor& zero_point) {
    require_float32(target, "inp", x);
    require_float32(target, "scale", scale);
    require_defined(target, "zero_point", zero_point);
    if (zero_point.dtype() != DType::int32)
      throw dtype_error(std::string(target) + ": operand 'zero_point' has dtype " +
                        std::string(dtype_name(zero_point.dtype())) + ", but must be int32");
    (void)infer_shape(p, x.shape(), scale.shape(), zero_point.shape());
    const std::size_t axis = channel_axis(p, x.shape());
    const std::int64_t c = x.shape()[axis];
    for (std::int64_t k = 0; k < c; ++k) {
      std::string where = "[";
      where += std::to_string(k);
      where += ']';
      check_fake_quantize_qparams(target, where, scale.data<float>()[k], zero_point.data<std::int32_t>()[k], p.quant_min,
                                  p.quant_max);
    }
    std::int64_t inner = 1;
    for (std::size_t i = axis + 1; i < x.shape().rank(); ++i) inner *= x.shape()[i];
    Tensor y = Tensor::empty(x.shape(), DType::float32, target);
    const std::int64_t outer = c == 0 ? 0 : x.numel() / (c * inner);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t k = 0; k < c; ++k) {
        const std::int64_t at = (o * c + k) * inner;
        kernels::fake_quantize(x.data<float>() + at, static_cast<std::size_t>(inner), scale.data<float>()[k],
                               zero_point.data<std::int32_t>()[k], p.quant_min, p.quant_max, y.data<float>() + at);
      }
    return y;
  }

  /// QuantizeLinear and DequantizeLinear per axis (opset 13 on), the int32 zero points cast to the
  /// int8 or uint8 that ONNX types them with.
  static void onnx_export(onnx_export_context& cx, const params& p) {
    const bool is_unsigned = onnx_zero_point_unsigned(cx, p.quant_min, p.quant_max);
    const onnx_operand& x = cx.input(0);
    const auto axis = static_cast<std::int64_t>(channel_axis(p, x.shape));
    const std::int64_t to = is_unsigned ? 2 : 3;  // ONNX's TensorProto UINT8 and INT8
    const std::string zero_point = cx.node1("Cast", {cx.input(2).name}, cx.fresh("zero_point"), {{"to", to}});
    const std::vector<onnx_attribute> attributes{{"axis", axis}};
    const std::string q = cx.node1("QuantizeLinear", {x.name, cx.input(1).name, zero_point}, cx.fresh("quantized"), attributes);
    cx.node("DequantizeLinear", {q, cx.input(1).name, zero_point}, {cx.output()}, attributes);
  }
};
inline constexpr fake_quantize_per_channel_fn fake_quantize_per_channel{};
TRACEMOD_REGISTER_BUILTIN_OP(fake_quantize_per_channel_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
