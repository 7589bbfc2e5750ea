// Packing for the int8 GEMM (layouts in int8_gemm_kernels.hpp): B once, into whole-k column panels
// with its column sums; A a row panel at a time, into per-thread scratch, as the driver goes.
#pragma once

#include <tracemod/kernels/detail/int8_gemm_kernels.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace tracemod::kernels::detail {

inline constexpr std::size_t int8_alignment = 64;

/// Deleter of the 64-byte-aligned arrays below.
struct int8_aligned_delete {
  void operator()(void* p) const noexcept { ::operator delete(p, std::align_val_t{int8_alignment}); }
};

template <class T>
using int8_aligned_array = std::unique_ptr<T[], int8_aligned_delete>;

/// `n` uninitialised Ts on 64 bytes (at least one, so the pointer is never null).
template <class T>
[[nodiscard]] int8_aligned_array<T> int8_allocate(std::size_t n) {
  return int8_aligned_array<T>(
      static_cast<T*>(::operator new(std::max<std::size_t>(n, 1) * sizeof(T), std::align_val_t{int8_alignment})));
}

/// Per-thread scratch of at least `n` Ts, reused across calls (contents unspecified); valid until the
/// next request for the same T on the same thread.
template <class T>
[[nodiscard]] T* int8_scratch(std::size_t n) {
  thread_local int8_aligned_array<T> buffer;
  thread_local std::size_t size = 0;
  if (size < n) {
    buffer.reset();
    size = 0;
    buffer = int8_allocate<T>(n);
    size = n;
  }
  return buffer.get();
}

/// k groups of Isa covering k values (the last zero-padded).
template <class Isa>
[[nodiscard]] constexpr std::int64_t int8_groups(std::int64_t k) noexcept {
  return (k + Isa::kgroup - 1) / Isa::kgroup;
}

/// B (k x n, element (p, j) at b[p * rs + j * cs]) as ceil(n / NR) panels of groups x NR x kgroup
/// values, panel q at dst + q * groups * NR * kgroup, zeros past k and n; colsum[j] = sum_p B(p, j).
template <class Isa>
void int8_pack_b(std::int64_t k, std::int64_t n, const std::int8_t* b, std::int64_t rs, std::int64_t cs,
                 typename Isa::b_type* dst, std::int32_t* colsum) {
  constexpr std::int64_t nr = Isa::nr, kg = Isa::kgroup;
  const std::int64_t groups = int8_groups<Isa>(k), panels = (n + nr - 1) / nr;
  for (std::int64_t q = 0; q < panels; ++q) {
    typename Isa::b_type* panel = dst + q * groups * nr * kg;
    for (std::int64_t col = 0; col < nr; ++col) {
      const std::int64_t j = q * nr + col;
      std::int32_t sum = 0;
      for (std::int64_t p = 0; p < groups * kg; ++p) {
        const std::int8_t v = j < n && p < k ? b[p * rs + j * cs] : std::int8_t{0};
        panel[(p / kg * nr + col) * kg + p % kg] = static_cast<typename Isa::b_type>(v);
        sum += v;
      }
      if (j < n) colsum[j] = sum;
    }
  }
}

/// Rows [i0, i0 + rows) of A (m x k, row-major with stride lda) as one row panel: groups x MR x
/// kgroup values, zeros past k (rows past `rows` are left unwritten: the tile for `rows` rows never
/// reads them).
template <class Isa>
void int8_pack_a(const std::uint8_t* a, std::int64_t lda, std::int64_t i0, std::int64_t rows, std::int64_t k,
                 typename Isa::a_type* dst) {
  constexpr std::int64_t mr = Isa::mr, kg = Isa::kgroup;
  const std::int64_t whole = k / kg, tail = k % kg;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint8_t* src = a + (i0 + r) * lda;
    typename Isa::a_type* out = dst + r * kg;
    if constexpr (sizeof(typename Isa::a_type) == 1 && kg == 4) {
      for (std::int64_t g = 0; g < whole; ++g) std::memcpy(out + g * mr * kg, src + g * kg, kg);
    } else {
      for (std::int64_t g = 0; g < whole; ++g)
        for (std::int64_t e = 0; e < kg; ++e) out[g * mr * kg + e] = static_cast<typename Isa::a_type>(src[g * kg + e]);
    }
    if (tail > 0)
      for (std::int64_t e = 0; e < kg; ++e)
        out[whole * mr * kg + e] =
            e < tail ? static_cast<typename Isa::a_type>(src[whole * kg + e]) : typename Isa::a_type{0};
  }
}

}  // namespace tracemod::kernels::detail
