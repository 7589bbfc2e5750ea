// In-register transpose of a square block of simd_width x simd_width floats, for kernels that turn
// planes (NCHW) into vectors over channels and back.
#pragma once

#include <tracemod/kernels/simd.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace tracemod::kernels::detail {

/// Lane l of an interleave takes lane (l / 2 + High * width / 2) of its first (even l) or second
/// (odd l) operand; as a one-operand swizzle, that lane of either operand.
template <std::uint32_t High>
struct interleave_lane {
  static constexpr std::uint32_t get(std::size_t l, std::size_t n) {
    return static_cast<std::uint32_t>(l / 2 + High * (n / 2));
  }
};
struct even_lane {
  static constexpr bool get(std::size_t l, std::size_t) { return l % 2 == 0; }
};

/// a_h, b_h, a_{h+1}, b_{h+1}, ... for h = 0 (High = 0) or h = width / 2 (High = 1).
template <std::uint32_t High>
inline fbatch interleave(const fbatch& a, const fbatch& b) noexcept {
#if defined(__AVX512F__)
  if constexpr (simd_width == 16) {
    // One two-source permute instead of two swizzles and a blend.
    constexpr int h = High * 8;
    const __m512i index = _mm512_setr_epi32(h, 16 + h, h + 1, 17 + h, h + 2, 18 + h, h + 3, 19 + h, h + 4, 20 + h,
                                            h + 5, 21 + h, h + 6, 22 + h, h + 7, 23 + h);
    return _mm512_permutex2var_ps(a, index, b);
  } else
#endif
  {
    constexpr auto lanes = xsimd::make_batch_constant<lane_index, interleave_lane<High>>();
    return xsimd::select(xsimd::make_batch_bool_constant<fbatch, even_lane>(), xsimd::swizzle(a, lanes),
                         xsimd::swizzle(b, lanes));
  }
}

/// rows[i] lane j becomes rows[j] lane i. log2(width) rounds of perfect shuffles: each round pairs
/// row i with row i + width / 2 and interleaves them into rows 2i and 2i + 1, which moves the bits
/// of a row index into the lane index one at a time.
inline void transpose_square(std::array<fbatch, simd_width>& rows) noexcept {
  constexpr std::size_t half = simd_width / 2;
  for (std::size_t round = 1; round < simd_width; round *= 2) {
    std::array<fbatch, simd_width> next;
    for (std::size_t i = 0; i < half; ++i) {
      next[2 * i] = interleave<0>(rows[i], rows[i + half]);
      next[2 * i + 1] = interleave<1>(rows[i], rows[i + half]);
    }
    rows = next;
  }
}

/// rows[j] stored at dst + j * step, aligned, j in [0, simd_width): unrolled, so that rows stays in
/// registers (a loop over the stores is a copy out of an array, which compilers turn into a call
/// to memcpy after spilling the array).
inline void store_rows(const std::array<fbatch, simd_width>& rows, float* dst, std::int64_t step) noexcept {
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    (rows[J].store_aligned(dst + static_cast<std::int64_t>(J) * step), ...);
  }(std::make_index_sequence<simd_width>{});
}

}  // namespace tracemod::kernels::detail
