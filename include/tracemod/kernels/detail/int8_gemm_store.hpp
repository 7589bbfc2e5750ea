// The epilogue of the int8 GEMM as one output element sees it: the raw int32 sum of a column, its
// offset (bias minus the activation zero point's correction), and the conversion to the output
// type. The vector micro-kernels (int8_gemm_kernels.hpp) compute the same operations lane by lane;
// this scalar form is the definition they match bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace tracemod::kernels::detail {

/// What the store of a tile needs, per call: per-column values padded to whole panels (so a vector
/// store never reads past them), and the clamp.
struct int8_store_params {
  const std::int32_t* offset;  ///< bias[j] - z_a * colsum(B)[j], wrapped modulo 2^32
  const float* multiplier;     ///< M_j (per tensor: the one value repeated)
  float lo, hi;                ///< qmin - z_out and qmax - z_out: integers, exact in float
  std::int32_t zero_point;     ///< z_out
};

/// The output types of the int8 GEMM: requantized uint8 or int8, dequantized float, raw int32.
template <class Out>
inline constexpr bool int8_gemm_output =
    std::is_same_v<Out, std::uint8_t> || std::is_same_v<Out, std::int8_t> || std::is_same_v<Out, float> ||
    std::is_same_v<Out, std::int32_t>;

/// a + b modulo 2^32: the vector adds wrap, and so does this (signed overflow would be UB).
[[nodiscard]] inline std::int32_t int8_wrapping_add(std::int32_t a, std::int32_t b) noexcept {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
}

/// Output element j of a row from its raw sum (before the offset):
///   raw = sum + offset[j]                                  (int32, wrapping)
///   int32:  raw
///   float:  float(raw) * M_j
///   uint8 / int8: nearbyint(clamp(float(raw) * M_j, lo, hi)) + z_out
/// Clamping before rounding equals clamping after (lo and hi are integers), and keeps the value in
/// range of the float-to-int conversion whatever M_j is.
template <class Out>
[[nodiscard]] inline Out int8_store_scalar(std::int32_t sum, std::int64_t j, const int8_store_params& p) {
  const std::int32_t raw = int8_wrapping_add(sum, p.offset[j]);
  if constexpr (std::is_same_v<Out, std::int32_t>) {
    return raw;
  } else {
    const float y = static_cast<float>(raw) * p.multiplier[j];
    if constexpr (std::is_same_v<Out, float>) {
      return y;
    } else {
      const float clamped = std::min(std::max(y, p.lo), p.hi);
      return static_cast<Out>(static_cast<std::int32_t>(std::nearbyint(clamped)) + p.zero_point);
    }
  }
}

}  // namespace tracemod::kernels::detail
