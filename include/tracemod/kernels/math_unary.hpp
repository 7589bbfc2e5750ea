// The unary math kernels (abs, rounding, sign, trigonometric and hyperbolic functions and their
// inverses, log, softplus) as one table: TRACEMOD_MATH_UNARY(X) calls
//   X(name, ONNX node type, scale rule, idempotent, expression of the fbatch x)
// once per function. This header expands it into the kernels (name##_op, each with the vector and
// the one-lane form every elementwise kernel has); functional/math_unary.hpp expands the same table
// into the ops, so a function is one row. The scale rule and idempotence are the ops' algebraic
// facts (functional/elementwise.hpp's kernel_facts): abs commutes with scaling by k > 0, and applying
// abs, ceil, floor, round or sign twice is applying it once.
#pragma once

#include <tracemod/kernels/elementwise.hpp>
#include <tracemod/kernels/simd.hpp>

#include <cmath>
#include <string_view>

namespace tracemod::kernels::detail {

/// f on each lane of x, through the scalar function. xsimd 8.1's log and asinh do not compile for
/// AVX-512BW (their select on int32 lanes casts to byte vectors), so those two go lane by lane there.
template <class F>
[[nodiscard]] fbatch each_lane(const fbatch& x, F f) noexcept {
  alignas(fbatch::arch_type::alignment()) float lanes[fbatch::size];
  x.store_aligned(lanes);
  for (float& v : lanes) v = f(v);
  return fbatch::load_aligned(lanes);
}

#if XSIMD_WITH_AVX512BW
inline fbatch log(const fbatch& x) noexcept { return each_lane(x, [](float v) { return std::log(v); }); }
inline fbatch asinh(const fbatch& x) noexcept { return each_lane(x, [](float v) { return std::asinh(v); }); }
#else
inline fbatch log(const fbatch& x) noexcept { return xsimd::log(x); }
inline fbatch asinh(const fbatch& x) noexcept { return xsimd::asinh(x); }
#endif

}  // namespace tracemod::kernels::detail

// Accuracy: xsimd 8.1's functions (a few ulps; log and asinh on AVX-512 the C library's, see
// detail::each_lane); round is ONNX's and numpy's round half to even
// (nearbyint in the default rounding mode); sign is -1, 0 or 1 (NaN stays NaN); softplus is
// log(1 + exp(x)) written as max(x, 0) + log1p(exp(-|x|)), which neither overflows nor loses the
// small values of very negative x.
#define TRACEMOD_MATH_UNARY(X)                                                                          \
  X(abs, "Abs", positive, true, xsimd::abs(x))                                                          \
  X(ceil, "Ceil", none, true, xsimd::ceil(x))                                                           \
  X(floor, "Floor", none, true, xsimd::floor(x))                                                        \
  X(round, "Round", none, true, xsimd::nearbyint(x))                                                    \
  X(sign, "Sign", none, true, xsimd::sign(x))                                                           \
  X(sin, "Sin", none, false, xsimd::sin(x))                                                             \
  X(cos, "Cos", none, false, xsimd::cos(x))                                                             \
  X(tan, "Tan", none, false, xsimd::tan(x))                                                             \
  X(asin, "Asin", none, false, xsimd::asin(x))                                                          \
  X(acos, "Acos", none, false, xsimd::acos(x))                                                          \
  X(atan, "Atan", none, false, xsimd::atan(x))                                                          \
  X(sinh, "Sinh", none, false, xsimd::sinh(x))                                                          \
  X(cosh, "Cosh", none, false, xsimd::cosh(x))                                                          \
  X(asinh, "Asinh", none, false, detail::asinh(x))                                                       \
  X(acosh, "Acosh", none, false, xsimd::acosh(x))                                                       \
  X(atanh, "Atanh", none, false, xsimd::atanh(x))                                                       \
  X(log, "Log", none, false, detail::log(x))                                                             \
  X(softplus, "Softplus", none, false,                                                                  \
    xsimd::max(x, fbatch(0.0f)) + xsimd::log1p(detail::exp_full_range(-xsimd::abs(x))))

namespace tracemod::kernels {

#define TRACEMOD_MATH_UNARY_KERNEL(op_name, onnx_type, scaling, idempotent, expression)  \
  struct op_name##_op {                                                                  \
    static constexpr std::string_view name = #op_name;                                  \
    fbatch operator()(const fbatch& x) const noexcept { return expression; }            \
    float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }  \
  };
TRACEMOD_MATH_UNARY(TRACEMOD_MATH_UNARY_KERNEL)
#undef TRACEMOD_MATH_UNARY_KERNEL

}  // namespace tracemod::kernels
