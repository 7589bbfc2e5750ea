// Loads of simd_width floats spaced `stride` apart, for the horizontal pass of strided pooling.
// xsimd 8.1's batch::gather always takes its generic lane-by-lane path, so stride 2 (the
// common case) is done with two contiguous loads and in-register shuffles instead.
#pragma once

#include <tracemod/kernels/simd.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace tracemod::kernels::detail {

// Lane l takes element (2 l + Odd) mod width: the even (odd) elements of a batch, twice over.
template <std::uint32_t Odd>
struct every_other_lane {
  static constexpr std::uint32_t get(std::size_t l, std::size_t n) {
    return static_cast<std::uint32_t>((2 * l + Odd) % n);
  }
};

struct lower_half {
  static constexpr bool get(std::size_t l, std::size_t n) { return l < n / 2; }
};

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
// GCC 12's AVX-512 permute intrinsics start from _mm512_undefined_ps(), which -Wuninitialized
// (or -Wmaybe-uninitialized, depending on where it is inlined) reports once inlined (GCC bug
// 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
/// {p[0], p[2], ..., p[2 (width - 1)]}, reading only p[0, 2 width - 1).
inline fbatch load_stride2(const float* p) noexcept {
  // a holds p[0, width): its even lanes are the lower half. b holds p[width - 1, 2 width - 1):
  // its odd lanes are p[width], p[width + 2], ..., the upper half, without reading p[2 width - 1].
  const fbatch a = fbatch::load_unaligned(p);
  const fbatch b = fbatch::load_unaligned(p + simd_width - 1);
  return xsimd::select(xsimd::make_batch_bool_constant<fbatch, lower_half>(),
                       xsimd::swizzle(a, xsimd::make_batch_constant<lane_index, every_other_lane<0>>()),
                       xsimd::swizzle(b, xsimd::make_batch_constant<lane_index, every_other_lane<1>>()));
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// {p[0], p[stride], ..., p[(width - 1) stride]}.
inline fbatch load_strided(const float* p, std::ptrdiff_t stride) noexcept {
  alignas(buffer_alignment) std::array<float, simd_width> lanes;
  for (std::size_t l = 0; l < simd_width; ++l) lanes[l] = p[static_cast<std::ptrdiff_t>(l) * stride];
  return fbatch::load_aligned(lanes.data());
}

}  // namespace tracemod::kernels::detail
