// The register-blocked inner kernel of the GEMM: a Rows x NR tile of C accumulated in vector
// registers from Rows broadcast rows of op(A) and one packed NR-wide panel of op(B), then merged
// into C as alpha * tile + bias + beta * C.
#pragma once

#include <tracemod/kernels/detail/activation.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace tracemod::kernels::detail {

/// Tile: MR rows of two vectors each (one for a last panel of at most W columns). MR * 2 accumulators
/// plus the two panel vectors and a broadcast fill the register file: 8 x 2 with AVX-512's 32
/// registers, 6 x 2 with 16.
inline constexpr std::int64_t gemm_mr = simd_width >= 16 ? 8 : 6;
inline constexpr std::int64_t gemm_nr = 2 * static_cast<std::int64_t>(simd_width);

/// What a micro-kernel call prefetches while it runs: nothing, the next row panel of an op(A) read in
/// place (next_rows), or a packed op(B) panel streamed from memory (next_panel).
enum class gemm_prefetch { none, next_rows, next_panel };

/// Row-major gemm_mr x gemm_nr accumulator tile, spilled once per micro-kernel call.
struct alignas(buffer_alignment) gemm_tile {
  std::array<float, gemm_mr * gemm_nr> v;
};

/// Tile rows I... of sum over k < kc of a(i, k) * b(k, :), over the first NV vectors of the panel,
/// handed to `store` a row at a time as store(i, x...), x... the row's NV vectors: a store policy,
/// spilling the tile (gemm_tile_spill) or merging it straight into C (gemm_small_k's). The
/// accumulators are indexed only by constants (fold expressions, no loops, no lambdas), and the
/// policy is forced inline, so they live in registers however the surrounding code gets inlined.
/// With next_rows, every other k step also prefetches a cache line of the gemm_mr rows at `next` (a_rs
/// apart, kc floats each, op(A) read in place): by the last step the rows' first kc / 2 / gemm_mr
/// lines each are on their way (all of them when gemm_mr is 8 and kc a multiple of 16), so the next
/// row panel is in L1 when its first tile starts instead of missing on every line. With next_panel,
/// step k prefetches line k from `next` (kc lines: half of a kc x NR panel of op(B) when NR is two
/// lines), so a panel streamed from L3 or memory arrives while the tiles before it compute.
template <bool Packed, std::int64_t NV, gemm_prefetch Prefetch, class Store, std::int64_t... I>
inline void gemm_micro_kernel(std::integer_sequence<std::int64_t, I...>, std::int64_t kc, const float* a,
                              std::int64_t a_rs, const float* b, const Store& store, const float* next = nullptr) {
  static_assert(NV == 1 || NV == 2);
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  constexpr std::int64_t line = 64 / sizeof(float);
  const std::int64_t rs = Packed ? 1 : a_rs;
  constexpr std::int64_t cs = Packed ? gemm_mr : 1;
  std::array<fbatch, NV * sizeof...(I)> acc{};
  for (std::int64_t k = 0; k < kc; ++k, a += cs, b += gemm_nr) {
    if constexpr (Prefetch == gemm_prefetch::next_rows) {
      // Step 2s fetches line s / MR of row s % MR, while that line is within the rows' kc floats.
      const std::int64_t step = k >> 1, column = step / gemm_mr * line;
      if ((k & 1) == 0 && column < kc) __builtin_prefetch(next + step % gemm_mr * a_rs + column, 0, 3);
    } else if constexpr (Prefetch == gemm_prefetch::next_panel) {
      __builtin_prefetch(next + k * line, 0, 3);
    }
    const fbatch b0 = fbatch::load_aligned(b);
    if constexpr (NV == 1) {
      ((acc[I] = xsimd::fma(fbatch(a[I * rs]), b0, acc[I])), ...);
    } else {
      const fbatch b1 = fbatch::load_aligned(b + w);
      ((acc[2 * I] = xsimd::fma(fbatch(a[I * rs]), b0, acc[2 * I]),
        acc[2 * I + 1] = xsimd::fma(fbatch(a[I * rs]), b1, acc[2 * I + 1])),
       ...);
    }
  }
  if constexpr (NV == 1)
    (store(I, acc[I]), ...);
  else
    (store(I, acc[2 * I], acc[2 * I + 1]), ...);
}

/// gemm_micro_kernel's store policy for a tile merged into C afterwards (gemm_store_tile).
struct gemm_tile_spill {
  gemm_tile& tile;

  template <class... X>
  [[gnu::always_inline]] void operator()(std::int64_t i, const X&... x) const {
    float* row = tile.v.data() + i * gemm_nr;
    ((x.store_aligned(row), row += simd_width), ...);
  }
};

/// How a tile merges into C: C(i, j) = act(alpha * tile(i, j) + bias[i] + beta * C(i, j) + R(i, j)),
/// where a null bias adds nothing, beta == 0 never reads C, and the residual R (laid out like C,
/// pointing at the tile's first element) is added, when not null, after the rest is rounded, so a
/// fused epilogue gives the bits of the separate add and activation kernels.
struct gemm_epilogue {
  float alpha, beta;
  const float* bias;
  const float* residual = nullptr;
  activation act = activation::none;
};

/// One vector x of a tile merged into C at c: act(alpha * x + bias + beta * C + residual), beta == 0
/// not reading C, a null residual adding nothing. Forced inline, so constant arguments (gemm_small_k's
/// alpha, beta and activation) fold away.
[[gnu::always_inline]] inline void gemm_store_vector(const fbatch& x, float alpha, float bias, float beta,
                                                     const float* residual, activation act, float* c) {
  fbatch y = xsimd::fma(fbatch(alpha), x, fbatch(bias));
  if (beta != 0.0f) y = xsimd::fma(fbatch(beta), fbatch::load_unaligned(c), y);
  if (residual != nullptr) y = y + fbatch::load_unaligned(residual);
  activate(act, y).store_unaligned(c);
}

/// Merges rows [0, rows) x columns [0, cols) of the tile into C.
inline void gemm_store_tile(const gemm_tile& tile, std::int64_t rows, std::int64_t cols, const gemm_epilogue& e,
                            float* c, std::int64_t rs_c, std::int64_t cs_c) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  const float alpha = e.alpha, beta = e.beta;
  if (cols % w == 0 && cs_c == 1) {
    for (std::int64_t i = 0; i < rows; ++i) {
      const float bias = e.bias != nullptr ? e.bias[i] : 0.0f;
      for (std::int64_t j = 0; j < cols; j += w)
        gemm_store_vector(fbatch::load_aligned(tile.v.data() + i * gemm_nr + j), alpha, bias, beta,
                          e.residual != nullptr ? e.residual + i * rs_c + j : nullptr, e.act, c + i * rs_c + j);
    }
    return;
  }
  // Element-wise: edge tiles, and C^T when the caller computes the transposed product. Loops go in
  // C's memory order with beta hoisted, so the compiler keeps them tight.
  const bool row_major = cs_c <= rs_c;
  const std::int64_t outer = row_major ? rows : cols, inner = row_major ? cols : rows;
  const std::int64_t outer_c = row_major ? rs_c : cs_c, inner_c = row_major ? cs_c : rs_c;
  const std::int64_t outer_t = row_major ? gemm_nr : 1, inner_t = row_major ? 1 : gemm_nr;
  alignas(buffer_alignment) std::array<float, gemm_mr> bias{};
  if (e.bias != nullptr) std::copy_n(e.bias, rows, bias.begin());
  for (std::int64_t o = 0; o < outer; ++o) {
    float* out = c + o * outer_c;
    const float* t = tile.v.data() + o * outer_t;
    // Row i of the tile is o (row-major walk) or q (column-major walk).
    const auto row_bias = [&](std::int64_t q) { return bias[row_major ? o : q]; };
    if (beta == 0.0f) {
      for (std::int64_t q = 0; q < inner; ++q) out[q * inner_c] = alpha * t[q * inner_t] + row_bias(q);
    } else {
      for (std::int64_t q = 0; q < inner; ++q)
        out[q * inner_c] = alpha * t[q * inner_t] + row_bias(q) + beta * out[q * inner_c];
    }
    if (e.residual != nullptr || e.act != activation::none)
      finish_run(out, inner, inner_c, e.residual != nullptr ? e.residual + o * outer_c : nullptr, e.act);
  }
}

/// Accumulates a Rows x (NV * W) tile (a read as a[i * a_rs + k], or a[k * gemm_mr + i] when
/// Packed; b a 64-byte aligned panel of gemm_nr floats per k) and merges its first cols columns into C
/// (bias, if any, indexed from the tile's first row). Unless `next` is null, a whole tile of an op(A)
/// read in place prefetches the next row panel's rows from it (Prefetch next_rows), or any tile the
/// lines of an op(B) panel (next_panel).
template <std::int64_t Rows, bool Packed, std::int64_t NV, gemm_prefetch Prefetch = gemm_prefetch::next_rows>
inline void gemm_tile_update(std::int64_t kc, const float* a, std::int64_t a_rs, const float* b, std::int64_t cols,
                             const gemm_epilogue& e, float* c, std::int64_t rs_c, std::int64_t cs_c,
                             const float* next) {
  gemm_tile tile;
  constexpr auto rows = std::make_integer_sequence<std::int64_t, Rows>{};
  constexpr bool prefetches =
      Prefetch == gemm_prefetch::next_panel || (Prefetch == gemm_prefetch::next_rows && !Packed && Rows == gemm_mr);
  if (prefetches && next != nullptr)
    gemm_micro_kernel<Packed, NV, prefetches ? Prefetch : gemm_prefetch::none>(rows, kc, a, a_rs, b,
                                                                              gemm_tile_spill{tile}, next);
  else
    gemm_micro_kernel<Packed, NV, gemm_prefetch::none>(rows, kc, a, a_rs, b, gemm_tile_spill{tile});
  gemm_store_tile(tile, Rows, cols, e, c, rs_c, cs_c);
}

using gemm_tile_fn = void (*)(std::int64_t, const float*, std::int64_t, const float*, std::int64_t,
                              const gemm_epilogue&, float*, std::int64_t, std::int64_t, const float*);

/// gemm_tile_update instantiations indexed by Rows - 1: partial row panels waste no flops.
template <bool Packed, std::int64_t NV, gemm_prefetch Prefetch, std::int64_t... R>
inline constexpr std::array<gemm_tile_fn, sizeof...(R)> make_gemm_tile_updates(
    std::integer_sequence<std::int64_t, R...>) {
  return {&gemm_tile_update<R + 1, Packed, NV, Prefetch>...};
}
template <bool Packed, std::int64_t NV, gemm_prefetch Prefetch = gemm_prefetch::next_rows>
inline constexpr auto gemm_tile_updates =
    make_gemm_tile_updates<Packed, NV, Prefetch>(std::make_integer_sequence<std::int64_t, gemm_mr>{});

/// The tile update for `rows` rows and `cols` columns: one vector per row when that covers them.
inline gemm_tile_fn gemm_tile_update_for(std::int64_t rows, std::int64_t cols, bool packed) {
  const bool one_vector = cols <= static_cast<std::int64_t>(simd_width);
  if (packed) return (one_vector ? gemm_tile_updates<true, 1> : gemm_tile_updates<true, 2>)[rows - 1];
  return (one_vector ? gemm_tile_updates<false, 1> : gemm_tile_updates<false, 2>)[rows - 1];
}

}  // namespace tracemod::kernels::detail
