// astype: a copy of a tensor converted to another dtype (MegEngine's and numpy's Tensor.astype), and
// the DType param it takes (printed and saved by name: float32, int32, bool, uint8, int8).
#pragma once

#include <tracemod/core/dtype.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/dtype_param.hpp>
#include <tracemod/functional/param_value.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace tracemod::functional {

namespace detail {

/// float -> int32 as tracemod defines it: toward zero, saturating, NaN -> 0 (see astype_fn).
inline std::int32_t float_to_int32(float v) noexcept {
  if (std::isnan(v)) return 0;
  if (v >= 2147483648.0f) return std::numeric_limits<std::int32_t>::max();
  if (v <= -2147483648.0f) return std::numeric_limits<std::int32_t>::min();
  return static_cast<std::int32_t>(v);
}

/// float or int32 -> uint8 / int8 as tracemod defines it: toward zero, saturating, NaN -> 0.
template <class To, class From>
To saturate_to_byte(From v) noexcept {
  if constexpr (std::is_same_v<From, float>)
    if (std::isnan(v)) return 0;
  if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
  if (v <= static_cast<From>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
  return static_cast<To>(v);
}

/// ONNX's TensorProto element types of the dtypes.
inline constexpr std::int64_t onnx_float = 1;
inline constexpr std::int64_t onnx_uint8 = 2;
inline constexpr std::int64_t onnx_int8 = 3;
inline constexpr std::int64_t onnx_int32 = 6;
inline constexpr std::int64_t onnx_int64 = 7;
inline constexpr std::int64_t onnx_bool = 9;

inline constexpr std::int64_t onnx_type_of(DType d) noexcept {
  switch (d) {
    case DType::int32: return onnx_int32;
    case DType::boolean: return onnx_bool;
    case DType::uint8: return onnx_uint8;
    case DType::int8: return onnx_int8;
    case DType::float32: break;
  }
  return onnx_float;
}

/// Element conversion as astype_fn defines it, From -> To.
template <class To, class From>
To convert_element(From v) noexcept {
  if constexpr (std::is_same_v<To, bool>)
    return v != From{};  // nonzero (NaN too) -> true
  else if constexpr (std::is_same_v<To, std::int32_t> && std::is_same_v<From, float>)
    return float_to_int32(v);
  else if constexpr (sizeof(To) == 1 && (std::is_same_v<From, float> || std::is_same_v<From, std::int32_t>))
    return saturate_to_byte<To>(v);
  else
    return static_cast<To>(v);  // int32 -> float rounds to nearest; bool -> 0 or 1
}

}  // namespace detail

struct astype_params {
  DType dtype = DType::float32;
  friend constexpr bool operator==(const astype_params&, const astype_params&) = default;
};

/// A new tensor of the same shape holding `self`'s values converted to `dtype` (a copy even when the
/// dtype is the same, as numpy's astype). int32 -> float32 rounds to nearest, ties to even (exact up
/// to 2^24). float32 -> int32 truncates toward zero, as numpy, MegEngine and C do; where they leave
/// the result undefined (x86 gives INT32_MIN), tracemod saturates: values at or beyond +-2^31 become
/// INT32_MAX / INT32_MIN, and NaN becomes 0. float32 or int32 -> uint8 / int8 truncates toward zero
/// and saturates to the type's range (NaN becomes 0; numpy wraps an int32 modulo 256). To bool:
/// nonzero (NaN included) is true, as numpy and PyTorch; from bool: true is 1. uint8 and int8 widen
/// exactly to int32 and float32.
struct astype_fn : op_base<astype_fn> {
  static constexpr std::string_view name = "astype";
  static constexpr std::string_view target = "astype";
  static constexpr call_kind kind = call_kind::method;
  static constexpr std::array operands{operand{"self", operand_kind::tensor}};
  using params = astype_params;
  static constexpr std::tuple fields{required("dtype", &params::dtype)};

  static constexpr bool shape_ignores_params = true;  // typed graphs know its shape at compile time
  static constexpr Shape infer_shape(const params&, const Shape& x) { return x; }
  static Dims infer_dims(const params&, const ShapeDims& x) { return x.dims; }
  /// A shape value stays one as int32 (core/dim.hpp).
  static std::optional<ShapeValue> infer_value(const params& p, const ShapeDims& x) {
    if (p.dtype != DType::int32 || x.value == nullptr) return std::nullopt;
    return *x.value;
  }
  /// The requested dtype; with the params unknown, the input's (it takes any dtype).
  static DType infer_dtype(const params* p, std::span<const DType> in) {
    if (p != nullptr) return p->dtype;
    return in.empty() ? DType::float32 : in.front();
  }

  static Tensor eager(const params& p, const Tensor& x) {
    require_defined(target, "self", x);
    if (x.dtype() == p.dtype) return x.clone();
    Tensor y = Tensor::empty(x.shape(), p.dtype, target);
    const auto n = static_cast<std::size_t>(x.numel());
    visit_dtype(x.dtype(), [&]<class From>(From) {
      visit_dtype(p.dtype, [&]<class To>(To) {
        const From* in = x.data<From>();
        To* out = y.data<To>();
        for (std::size_t i = 0; i < n; ++i) out[i] = detail::convert_element<To>(in[i]);
      });
    });
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params& p) {
    cx.node("Cast", {cx.input(0).name}, {cx.output()}, {{"to", detail::onnx_type_of(p.dtype)}});
  }
  static constexpr std::array onnx_import_types{std::string_view("Cast")};
  static constexpr std::array onnx_import_attributes{std::string_view("to"), std::string_view("saturate")};
  static void onnx_import(onnx_import_context& cx) {
    const std::int64_t to = cx.attr_int("to", 0);
    if (to != detail::onnx_float && to != detail::onnx_int32 && to != detail::onnx_int64 && to != detail::onnx_bool)
      cx.unsupported("Cast to element type " + std::to_string(to) + " (tracemod holds FLOAT, INT32, INT64 as INT32, and BOOL)");
    // INT64 (the shapes Reshape reads) is held as int32, the type tracemod computes shapes in.
    const DType d = to == detail::onnx_int32 || to == detail::onnx_int64 ? DType::int32
                    : to == detail::onnx_bool                            ? DType::boolean
                                                                         : DType::float32;
    cx.bind(cx.call<astype_fn>({d}, cx.tensor(0)));
  }
};
inline constexpr astype_fn astype{};
TRACEMOD_REGISTER_BUILTIN_OP(astype_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
