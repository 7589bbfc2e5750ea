// A GEMM with a short inner extent (k <= gemm_small_k_max: 1x1 convolutions of few input channels,
// MobileNetV2's 32 -> 16 and 16 -> 96 at 112x112): a tile then does only k steps, so spilling it
// and reading it back to store it (gemm_blocked's tile update) costs about as much as its FMAs.
// Here each tile goes from its accumulators straight into C, the epilogue applied on the way. No k
// blocking: each element of C is one sum over k in ascending order, as in gemm_blocked's
// micro-kernel, so both give the same bits.
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/activation.hpp>
#include <tracemod/kernels/detail/cache_sizes.hpp>
#include <tracemod/kernels/detail/gemm_micro_kernel.hpp>
#include <tracemod/kernels/detail/gemm_pack.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace tracemod::kernels::detail {

/// Largest k that gemm_small_k takes.
inline constexpr std::int64_t gemm_small_k_max = 32;

/// gemm_micro_kernel's store policy for gemm_small_k: each accumulator straight into C as
/// act(acc + bias + residual), gemm_store_tile's vector epilogue with alpha 1 and beta 0, so the
/// same operations in the same order (fma(1, x, bias) is x + bias). C's rows c_rs apart, the
/// residual laid out like C (null: none), the bias indexed from the tile's first row (null: none).
template <activation Act>
struct gemm_small_k_store {
  const float* bias;
  const float* residual;
  float* c;
  std::int64_t c_rs;

  template <class... X>
  [[gnu::always_inline]] void operator()(std::int64_t i, const X&... x) const {
    constexpr auto w = static_cast<std::int64_t>(simd_width);
    const float b = bias != nullptr ? bias[i] : 0.0f;
    const float* const r = residual != nullptr ? residual + i * c_rs : nullptr;
    float* const row = c + i * c_rs;
    std::int64_t j = 0;
    ((gemm_store_vector(x, 1.0f, b, 0.0f, r != nullptr ? r + j : nullptr, Act, row + j), j += w), ...);
  }
};

using gemm_small_k_tile_fn = void (*)(std::int64_t, const float*, std::int64_t, const float*, const float*,
                                      const float*, float*, std::int64_t);

/// Rows x NR columns of C = act(op(A) op(B) + bias + residual) over k < kc, with op(A)'s rows read
/// in place (a_rs apart) and b one packed NR-wide panel of op(B) (64-byte aligned): the accumulators
/// go from registers into C. Flattened: with the micro-kernel called out of line, GCC 12 computed
/// all of the tile's store addresses up front and spilled them (96 x 12544 x 16 7 % slower).
template <activation Act, std::int64_t Rows>
[[gnu::flatten]] inline void gemm_small_k_tile(std::int64_t kc, const float* a, std::int64_t a_rs, const float* b,
                                               const float* bias, const float* residual, float* c, std::int64_t c_rs) {
  gemm_micro_kernel<false, 2, gemm_prefetch::none>(std::make_integer_sequence<std::int64_t, Rows>{}, kc, a, a_rs, b,
                                     gemm_small_k_store<Act>{bias, residual, c, c_rs});
}

/// gemm_small_k_tile instantiations indexed by Rows - 1.
template <activation Act, std::int64_t... R>
inline constexpr std::array<gemm_small_k_tile_fn, sizeof...(R)> make_gemm_small_k_tiles(
    std::integer_sequence<std::int64_t, R...>) {
  return {&gemm_small_k_tile<Act, R + 1>...};
}
template <activation Act>
inline constexpr auto gemm_small_k_tiles =
    make_gemm_small_k_tiles<Act>(std::make_integer_sequence<std::int64_t, gemm_mr>{});

/// C = act(op(A) op(B) + bias + residual) for m, n > 0 and 0 < k <= gemm_small_k_max, where op(A)
/// (m x k, read in place) has contiguous rows, op(B) (k x n) is `b` as gemm_pack_b reads it, C
/// (m x n) has contiguous rows, the optional bias holds one value per row of C and the optional
/// residual is laid out like C. op(B) is packed by blocks of NR-wide column panels that fill L1
/// (its whole rows, 16 or 32, of a few hundred columns: each a sequential read the hardware
/// prefetcher follows; read in place by the tiles instead, as 16-32 interleaved short streams,
/// they missed in a network where they come from L3); in a block, row panels outer, so each tile
/// continues the gemm_mr rows of C the previous one wrote, as long runs of stores. A last panel
/// narrower than NR goes through gemm_blocked's tile update. Threads split the column panels;
/// every element is computed the same way whichever thread runs it, so results are bit-identical
/// at any thread count.
template <activation Act>
inline void gemm_small_k_with(std::int64_t m, std::int64_t n, std::int64_t k, const strided_matrix& a,
                              const strided_matrix& b, const float* bias, const strided_output& c,
                              const float* residual) {
  const std::int64_t panels = (n + gemm_nr - 1) / gemm_nr;
  const std::int64_t block_panels =
      std::max<std::int64_t>(cache_sizes().l1d / (k * gemm_nr * std::int64_t{sizeof(float)}), 1);
  const std::int64_t block_floats = block_panels * gemm_nr * k;
  const std::int64_t grain = grain_in_items(grains().gemm_flops, 2 * m * gemm_nr * k);
  float* const buffers = scratch(scratch_slot::gemm_b_panels,
                                 static_cast<std::size_t>(parallel_chunk_count(0, panels, grain) * block_floats));
  parallel_for(0, panels, grain, [&](int chunk, std::int64_t lo, std::int64_t hi) {
    float* const packed = buffers + chunk * block_floats;
    for (std::int64_t first = lo; first < hi; first += block_panels) {
      const std::int64_t last = std::min(hi, first + block_panels);
      const std::int64_t j0 = first * gemm_nr, cols = std::min(n, last * gemm_nr) - j0;
      const std::int64_t whole = cols / gemm_nr, rest = cols % gemm_nr;  // whole panels, a partial one's width
      gemm_pack_b(b, 0, k, j0, cols, packed);
      for (std::int64_t i0 = 0; i0 < m; i0 += gemm_mr) {
        const std::int64_t rows = std::min(gemm_mr, m - i0);
        const float* const a_rows = a.data + i0 * a.rs;
        const float* const bias_rows = bias != nullptr ? bias + i0 : nullptr;
        const float* const r = residual != nullptr ? residual + i0 * c.rs + j0 : nullptr;
        float* const c_rows = c.data + i0 * c.rs + j0;
        for (std::int64_t p = 0; p < whole; ++p) {
          const std::int64_t j = p * gemm_nr;
          gemm_small_k_tiles<Act>[rows - 1](k, a_rows, a.rs, packed + j * k, bias_rows,
                                            r != nullptr ? r + j : nullptr, c_rows + j, c.rs);
        }
        if (rest > 0) {
          const std::int64_t j = whole * gemm_nr;
          const gemm_epilogue e{1.0f, 0.0f, bias_rows, r != nullptr ? r + j : nullptr, Act};
          gemm_tile_update_for(rows, rest, false)(k, a_rows, a.rs, packed + j * k, rest, e, c_rows + j, c.rs, 1,
                                                  nullptr);
        }
      }
    }
  });
}

inline void gemm_small_k(std::int64_t m, std::int64_t n, std::int64_t k, const strided_matrix& a,
                         const strided_matrix& b, const float* bias, const strided_output& c, const float* residual,
                         activation act) {
  switch (act) {
    case activation::none: gemm_small_k_with<activation::none>(m, n, k, a, b, bias, c, residual); return;
    case activation::relu: gemm_small_k_with<activation::relu>(m, n, k, a, b, bias, c, residual); return;
    case activation::relu6: gemm_small_k_with<activation::relu6>(m, n, k, a, b, bias, c, residual); return;
  }
}

}  // namespace tracemod::kernels::detail
