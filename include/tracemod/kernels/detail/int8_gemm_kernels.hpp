// The micro-kernels of the int8 GEMM, one per instruction set, each a struct with its tile shape
// (mr x nr), its packed element types and tile<Rows, Out>(...): a Rows x NR block of C from a row
// panel of A (packed, or rows read in place: a_rs apart, a group every a_gs) and a packed column
// panel of B, over all of k, stored through the epilogue while the sums are in registers. They share
// no code, so a run-time dispatcher can compile each for its own target.
//
// Packed layouts (int8_gemm_pack.hpp writes them): k is cut into groups of `kgroup` consecutive
// values; a B panel holds, per group, NR columns of kgroup values each (one 32-bit lane per column),
// and an A panel, per group, MR rows of kgroup values (32 bits per row, broadcast to every lane).
// One instruction then adds a group's products into each lane.
//
// - avx512_vnni: vpdpbusd (u8 x s8, four products summed into each int32 lane): exact, since
//   the four-product sum (at most 4 x 255 x 128) goes straight into the 32-bit accumulator.
// - avx2: vpmaddwd on 16-bit operands (A zero-extended, B sign-extended when packed; two products
//   per int32 lane). Exact. vpmaddubsw (u8 x s8 -> s16 pairs) multiplies twice as many bytes per
//   instruction but saturates: 2 x 255 x 127 exceeds int16, so PyTorch's fbgemm needs activations reduced to 7 bits
//   (reduce_range) to use it. Widening keeps the full u8 range at the cost of packed panels twice
//   the size and half the products per instruction.
// - scalar: plain C++, the same grouping, for every other target.
#pragma once

#include <tracemod/kernels/detail/int8_gemm_store.hpp>
#include <tracemod/kernels/detail/intrinsics.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace tracemod::kernels::detail {

/// 32 bits at p (a row's group of an A panel), without alignment or aliasing assumptions.
[[nodiscard]] inline std::int32_t int8_load32(const void* p) noexcept {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// Portable kernel: MR x NR int32 sums in an array, wrapping as the vector adds do.
struct int8_isa_scalar {
  static constexpr const char* name = "scalar";
  static constexpr std::int64_t mr = 4, nr = 8, kgroup = 4;
  using a_type = std::uint8_t;
  using b_type = std::int8_t;

  template <int Rows, class Out>
  static void tile(std::int64_t groups, const a_type* a, std::int64_t a_rs, std::int64_t a_gs, const b_type* b,
                   const int8_store_params& p, std::int64_t j0, std::int64_t cols, Out* c, std::int64_t ldc) {
    std::array<std::uint32_t, Rows * nr> acc{};
    for (std::int64_t g = 0; g < groups; ++g, a += a_gs, b += nr * kgroup)
      for (int r = 0; r < Rows; ++r)
        for (std::int64_t col = 0; col < nr; ++col) {
          std::int32_t s = 0;
          for (std::int64_t e = 0; e < kgroup; ++e) s += std::int32_t{a[r * a_rs + e]} * b[col * kgroup + e];
          acc[static_cast<std::size_t>(r * nr + col)] += static_cast<std::uint32_t>(s);
        }
    for (int r = 0; r < Rows; ++r)
      for (std::int64_t col = 0; col < cols; ++col)
        c[r * ldc + col] =
            int8_store_scalar<Out>(static_cast<std::int32_t>(acc[static_cast<std::size_t>(r * nr + col)]), j0 + col, p);
  }
};

#if defined(__AVX2__)
/// AVX2: 6 x 16 tile (12 accumulators, two panel vectors and a broadcast in 16 ymm registers);
/// 16-bit operands, two k per group.
struct int8_isa_avx2 {
  static constexpr const char* name = "avx2";
  static constexpr std::int64_t mr = 6, nr = 16, kgroup = 2;
  using a_type = std::int16_t;
  using b_type = std::int16_t;

  template <class Out>
  static void store8(__m256i sum, std::int64_t j, std::int64_t cols, const int8_store_params& p, Out* c) {
    const __m256i raw = _mm256_add_epi32(sum, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.offset + j)));
    alignas(32) std::array<Out, 8> out;
    if constexpr (std::is_same_v<Out, std::int32_t>) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(out.data()), raw);
    } else {
      const __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(raw), _mm256_loadu_ps(p.multiplier + j));
      if constexpr (std::is_same_v<Out, float>) {
        _mm256_store_ps(out.data(), y);
      } else {
        const __m256 clamped = _mm256_min_ps(_mm256_max_ps(y, _mm256_set1_ps(p.lo)), _mm256_set1_ps(p.hi));
        const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(clamped), _mm256_set1_epi32(p.zero_point));
        alignas(32) std::array<std::int32_t, 8> wide;
        _mm256_store_si256(reinterpret_cast<__m256i*>(wide.data()), q);
        for (std::size_t l = 0; l < 8; ++l) out[l] = static_cast<Out>(wide[l]);
      }
    }
    std::memcpy(c, out.data(), static_cast<std::size_t>(cols) * sizeof(Out));
  }

  template <int Rows, class Out>
  static void tile(std::int64_t groups, const a_type* a, std::int64_t a_rs, std::int64_t a_gs, const b_type* b,
                   const int8_store_params& p, std::int64_t j0, std::int64_t cols, Out* c, std::int64_t ldc) {
    __m256i acc[2 * Rows];
#pragma GCC unroll 32
    for (int v = 0; v < 2 * Rows; ++v) acc[v] = _mm256_setzero_si256();
    for (std::int64_t g = 0; g < groups; ++g, a += a_gs, b += nr * kgroup) {
      const __m256i b0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
      const __m256i b1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 16));
#pragma GCC unroll 32
      for (int r = 0; r < Rows; ++r) {
        const __m256i ar = _mm256_set1_epi32(int8_load32(a + r * a_rs));
        acc[2 * r] = _mm256_add_epi32(acc[2 * r], _mm256_madd_epi16(ar, b0));
        acc[2 * r + 1] = _mm256_add_epi32(acc[2 * r + 1], _mm256_madd_epi16(ar, b1));
      }
    }
#pragma GCC unroll 32
    for (int r = 0; r < Rows; ++r) {
      store8(acc[2 * r], j0, std::min<std::int64_t>(cols, 8), p, c + r * ldc);
      if (cols > 8) store8(acc[2 * r + 1], j0 + 8, cols - 8, p, c + r * ldc + 8);
    }
  }
};
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
/// AVX-512 VNNI: 12 x 32 tile (24 zmm accumulators, two panel vectors and a broadcast of 32
/// registers), four k per group. 12 rows measured 4-6 % faster than 8 at 512^3: fewer loads per
/// vpdpbusd and a longer loop per epilogue.
struct int8_isa_avx512_vnni {
  /// acc + the four-product sums of u8 `a` and s8 `b` per lane. g++ 12 copies every accumulator
  /// to another register and back around the intrinsic in the tile's loop (16 extra moves per k
  /// group, 10-15 % of the tile's time); the asm statement updates it in place.
  [[gnu::always_inline]] static inline __m512i dpbusd(__m512i acc, __m512i a, __m512i b) noexcept {
#if defined(__GNUC__) && !defined(__clang__)
    asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
#else
    return _mm512_dpbusd_epi32(acc, a, b);
#endif
  }

  static constexpr const char* name = "avx512_vnni";
  static constexpr std::int64_t mr = 12, nr = 32, kgroup = 4;
  using a_type = std::uint8_t;
  using b_type = std::int8_t;

  template <class Out>
  static void store16(__m512i sum, std::int64_t j, __mmask16 mask, const int8_store_params& p, Out* c) {
    const __m512i raw = _mm512_add_epi32(sum, _mm512_loadu_si512(p.offset + j));
    if constexpr (std::is_same_v<Out, std::int32_t>) {
      _mm512_mask_storeu_epi32(c, mask, raw);
    } else {
      const __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(raw), _mm512_loadu_ps(p.multiplier + j));
      if constexpr (std::is_same_v<Out, float>) {
        _mm512_mask_storeu_ps(c, mask, y);
      } else {
        const __m512 clamped = _mm512_min_ps(_mm512_max_ps(y, _mm512_set1_ps(p.lo)), _mm512_set1_ps(p.hi));
        const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(clamped), _mm512_set1_epi32(p.zero_point));
        _mm512_mask_cvtepi32_storeu_epi8(c, mask, q);  // in range: keeping the low byte is exact
      }
    }
  }

  template <int Rows, class Out>
  static void tile(std::int64_t groups, const a_type* a, std::int64_t a_rs, std::int64_t a_gs, const b_type* b,
                   const int8_store_params& p, std::int64_t j0, std::int64_t cols, Out* c, std::int64_t ldc) {
    __m512i acc[2 * Rows];
#pragma GCC unroll 32
    for (int v = 0; v < 2 * Rows; ++v) acc[v] = _mm512_setzero_si512();
    for (std::int64_t g = 0; g < groups; ++g, a += a_gs, b += nr * kgroup) {
      const __m512i b0 = _mm512_load_si512(b);
      const __m512i b1 = _mm512_load_si512(b + 64);
#pragma GCC unroll 32
      for (int r = 0; r < Rows; ++r) {
        const __m512i ar = _mm512_set1_epi32(int8_load32(a + r * a_rs));
        acc[2 * r] = dpbusd(acc[2 * r], ar, b0);
        acc[2 * r + 1] = dpbusd(acc[2 * r + 1], ar, b1);
      }
    }
    const auto mask_of = [](std::int64_t n) {
      return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n <= 0 ? __mmask16{0} : static_cast<__mmask16>((1u << n) - 1u);
    };
    const __mmask16 m0 = mask_of(cols), m1 = mask_of(cols - 16);
#pragma GCC unroll 32
    for (int r = 0; r < Rows; ++r) {
      store16(acc[2 * r], j0, m0, p, c + r * ldc);
      if (cols > 16) store16(acc[2 * r + 1], j0 + 16, m1, p, c + r * ldc + 16);
    }
  }
};
#endif

/// Pointer to tile<Rows, Out> of Isa for Rows = 1..MR, indexed by Rows - 1.
template <class Isa, class Out>
using int8_tile_fn = void (*)(std::int64_t, const typename Isa::a_type*, std::int64_t, std::int64_t,
                              const typename Isa::b_type*, const int8_store_params&, std::int64_t, std::int64_t, Out*,
                              std::int64_t);

template <class Isa, class Out, std::size_t... R>
constexpr std::array<int8_tile_fn<Isa, Out>, sizeof...(R)> int8_make_tiles(std::index_sequence<R...>) {
  return {&Isa::template tile<static_cast<int>(R) + 1, Out>...};
}

template <class Isa, class Out>
inline constexpr auto int8_tiles = int8_make_tiles<Isa, Out>(std::make_index_sequence<Isa::mr>{});

}  // namespace tracemod::kernels::detail
