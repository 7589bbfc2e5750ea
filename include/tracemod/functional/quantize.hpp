// quantize, dequantize and quantized_add: the per-tensor affine quantization of an int8 graph
// (PyTorch's quantize_per_tensor / dequantize and quantized::add). A quantized tensor is a uint8 or
// int8 tensor whose scale and zero point are the stored arguments of the ops that make and read it:
//   quantize:   q = clamp(nearbyint(x * (1 / scale)) + zero_point, dtype's range)   (NaN -> zero_point)
//   dequantize: x = (q - zero_point) * scale                                       (float32)
// nearbyint rounds half to even, and the reciprocal of the scale is taken once in float32, as
// fake_quantize computes: a quantize-dequantize pair has fake_quantize's bits.
#pragma once

#include <tracemod/core/dtype.hpp>
#include <tracemod/functional/dtype_param.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/broadcast_map.hpp>
#include <tracemod/kernels/detail/activation.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

namespace tracemod::functional {

namespace detail {

/// [lo, hi] of a quantized dtype (uint8 or int8); value_error naming `op` for any other.
inline std::array<std::int64_t, 2> quantized_range(std::string_view op, DType d) {
  if (d == DType::uint8) return {0, 255};
  if (d == DType::int8) return {-128, 127};
  throw value_error(std::string(op) + ": dtype " + std::string(dtype_name(d)) + " is not a quantized dtype (uint8 or int8)");
}

/// Rejects a scale that is not positive and finite (in float32) or a zero point outside d's range,
/// naming `op` and which qparams (`what`: "input", "output", ...).
inline void check_quantized_qparams(std::string_view op, std::string_view what, double scale, std::int64_t zero_point,
                                    DType d) {
  const auto s = static_cast<float>(scale);
  if (!(s > 0.f) || !std::isfinite(s))
    throw value_error(std::string(op) + ": the " + std::string(what) + " scale " + repr_real(scale) +
                      " is not positive and finite");
  const auto [lo, hi] = quantized_range(op, d);
  if (zero_point < lo || zero_point > hi)
    throw value_error(std::string(op) + ": the " + std::string(what) + " zero point " + std::to_string(zero_point) +
                      " is outside " + std::string(dtype_name(d)) + "'s [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
}

/// Rejects a tensor that is not of a quantized dtype, naming the op and operand.
inline void require_quantized(std::string_view op, std::string_view operand, const Tensor& t, DType want) {
  require_defined(op, operand, t);
  if (t.dtype() != want)
    throw dtype_error(std::string(op) + ": operand '" + std::string(operand) + "' has dtype " +
                      std::string(dtype_name(t.dtype())) + " (shape " + t.shape().to_string() + "), expected " +
                      std::string(dtype_name(want)));
}

/// The activation a quantized op folds into its clamp: "identity", "relu" or "relu6".
inline kernels::activation quantized_activation(std::string_view op, std::string_view mode) {
  if (mode == "identity") return kernels::activation::none;
  if (mode == "relu") return kernels::activation::relu;
  if (mode == "relu6") return kernels::activation::relu6;
  throw value_error(std::string(op) + ": unknown nonlinear_mode '" + std::string(mode) +
                    "' (supported: identity, relu, relu6)");
}

/// One quantized level: clamp(nearbyint(v * inv_scale) + zero_point, lo, hi); NaN gives the zero point.
inline std::int32_t quantize_value(float v, float inv_scale, float zero_point, float lo, float hi) noexcept {
  const float r = std::nearbyint(v * inv_scale) + zero_point;
  if (std::isnan(r)) return static_cast<std::int32_t>(zero_point);
  return static_cast<std::int32_t>(r < lo ? lo : (r > hi ? hi : r));
}

}  // namespace detail

struct quantize_params {
  double scale = 1;  ///< used in float32
  std::int64_t zero_point = 0;
  DType dtype = DType::uint8;
};

/// float32 -> uint8 / int8 with one scale and zero point (PyTorch's quantize_per_tensor).
struct quantize_fn : op_base<quantize_fn> {
  static constexpr std::string_view name = "quantize";
  static constexpr std::string_view target = "nn.quantize";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = quantize_params;
  static constexpr std::tuple fields{positional("scale", &params::scale), positional("zero_point", &params::zero_point),
                                     positional("dtype", &params::dtype)};

  static Shape infer_shape(const params& p, const Shape& x) {
    detail::check_quantized_qparams(target, "output", p.scale, p.zero_point, p.dtype);
    return x;
  }
  static Dims infer_dims(const params&, const ShapeDims& x) { return x.dims; }
  static DType infer_dtype(const params* p, std::span<const DType>) { return p != nullptr ? p->dtype : DType::uint8; }

  static Tensor eager(const params& p, const Tensor& x) {
    require_float32(target, "inp", x);
    const auto [lo, hi] = detail::quantized_range(target, p.dtype);
    detail::check_quantized_qparams(target, "output", p.scale, p.zero_point, p.dtype);
    Tensor y = Tensor::empty(x.shape(), p.dtype, target);
    const float inv = 1.0f / static_cast<float>(p.scale);
    const auto zp = static_cast<float>(p.zero_point), flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
    const float* in = x.data<float>();
    const auto n = static_cast<std::size_t>(x.numel());
    visit_dtype(p.dtype, [&]<class T>(T) {
      if constexpr (sizeof(T) == 1 && !std::is_same_v<T, bool>) {
        T* out = y.data<T>();
        for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(detail::quantize_value(in[i], inv, zp, flo, fhi));
      }
    });
    return y;
  }
};
inline constexpr quantize_fn quantize{};
TRACEMOD_REGISTER_BUILTIN_OP(quantize_fn);

struct dequantize_params {
  double scale = 1;
  std::int64_t zero_point = 0;
};

/// uint8 / int8 -> float32: (q - zero_point) * scale (PyTorch's dequantize).
struct dequantize_fn : op_base<dequantize_fn> {
  static constexpr std::string_view name = "dequantize";
  static constexpr std::string_view target = "nn.dequantize";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = dequantize_params;
  static constexpr std::tuple fields{positional("scale", &params::scale), positional("zero_point", &params::zero_point)};

  static Shape infer_shape(const params&, const Shape& x) { return x; }
  static Dims infer_dims(const params&, const ShapeDims& x) { return x.dims; }
  static DType infer_dtype(const params*, std::span<const DType>) { return DType::float32; }

  static Tensor eager(const params& p, const Tensor& x) {
    require_defined(target, "inp", x);
    detail::check_quantized_qparams(target, "input", p.scale, p.zero_point, x.dtype());
    Tensor y = Tensor::empty(x.shape(), DType::float32, target);
    const auto s = static_cast<float>(p.scale);
    const auto zp = static_cast<std::int32_t>(p.zero_point);
    float* out = y.data<float>();
    const auto n = static_cast<std::size_t>(x.numel());
    visit_dtype(x.dtype(), [&]<class T>(T) {
      if constexpr (sizeof(T) == 1 && !std::is_same_v<T, bool>) {
        const T* in = x.data<T>();
        for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<std::int32_t>(in[i]) - zp) * s;
      }
    });
    return y;
  }
};
inline constexpr dequantize_fn dequantize{};
TRACEMOD_REGISTER_BUILTIN_OP(dequantize_fn);

struct quantized_add_params {
  double x_scale = 1;
  std::int64_t x_zero_point = 0;
  double y_scale = 1;
  std::int64_t y_zero_point = 0;
  double scale = 1;  ///< the output's
  std::int64_t zero_point = 0;
  std::string nonlinear_mode = "identity";  ///< "identity", "relu" or "relu6"
};

/// The sum of two uint8 tensors (numpy broadcasting), each with its own qparams, requantized to the
/// output's: each element is dequantized (float32), added, activated (relu: max(v, 0); relu6 also
/// min(v, 6)) and quantized as `quantize` does, so it has the bits of fake-quantized float arithmetic.
struct quantized_add_fn : op_base<quantized_add_fn> {
  static constexpr std::string_view name = "quantized_add";
  static constexpr std::string_view target = "nn.quantized_add";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"x", operand_kind::tensor}, operand{"y", operand_kind::tensor}};
  using params = quantized_add_params;
  static constexpr std::tuple fields{
      positional("x_scale", &params::x_scale),       positional("x_zero_point", &params::x_zero_point),
      positional("y_scale", &params::y_scale),       positional("y_zero_point", &params::y_zero_point),
      positional("scale", &params::scale),           positional("zero_point", &params::zero_point),
      keyword("nonlinear_mode", &params::nonlinear_mode)};

  static void check(const params& p) {
    detail::check_quantized_qparams(target, "x", p.x_scale, p.x_zero_point, DType::uint8);
    detail::check_quantized_qparams(target, "y", p.y_scale, p.y_zero_point, DType::uint8);
    detail::check_quantized_qparams(target, "output", p.scale, p.zero_point, DType::uint8);
    (void)detail::quantized_activation(target, p.nonlinear_mode);
  }
  static Shape infer_shape(const params& p, const Shape& a, const Shape& b) {
    check(p);
    return broadcast_shapes(a, b, target);
  }
  static DType infer_dtype(const params*, std::span<const DType>) { return DType::uint8; }

  static Tensor eager(const params& p, const Tensor& a, const Tensor& b) {
    detail::require_quantized(target, "x", a, DType::uint8);
    detail::require_quantized(target, "y", b, DType::uint8);
    check(p);
    const Shape out = broadcast_shapes(a.shape(), b.shape(), target);
    Tensor y = Tensor::empty(out, DType::uint8, target);
    const auto sx = static_cast<float>(p.x_scale), sy = static_cast<float>(p.y_scale);
    const auto zx = static_cast<std::int32_t>(p.x_zero_point), zy = static_cast<std::int32_t>(p.y_zero_point);
    const float inv = 1.0f / static_cast<float>(p.scale), zp = static_cast<float>(p.zero_point);
    const kernels::activation act = detail::quantized_activation(target, p.nonlinear_mode);
    kernels::broadcast_map(
        out, y.data<std::uint8_t>(),
        [=](std::uint8_t qa, std::uint8_t qb) {
          float v = static_cast<float>(static_cast<std::int32_t>(qa) - zx) * sx +
                    static_cast<float>(static_cast<std::int32_t>(qb) - zy) * sy;
          if (act != kernels::activation::none) v = v < 0.f ? 0.f : v;
          if (act == kernels::activation::relu6) v = v > 6.f ? 6.f : v;
          return static_cast<std::uint8_t>(detail::quantize_value(v, inv, zp, 0.f, 255.f));
        },
        {a.shape(), b.shape()}, a.data<std::uint8_t>(), b.data<std::uint8_t>());
    return y;
  }
};
inline constexpr quantized_add_fn quantized_add{};
TRACEMOD_REGISTER_BUILTIN_OP(quantized_add_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
