// Cache blocking around the micro-kernel (Goto/BLIS loop order, with the broadcast and vector
// roles of BLIS's x86 kernels): a kc x nc block of op(B) is packed once and stays in L2 while every
// row panel of op(A) (kc x MR, L1-resident) sweeps across its NR-wide panels. kc and nc follow from
// the cache sizes found at run time (gemm_blocking_for).
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/cache_sizes.hpp>
#include <tracemod/kernels/detail/gemm_gemv.hpp>
#include <tracemod/kernels/detail/gemm_micro_kernel.hpp>
#include <tracemod/kernels/detail/gemm_pack.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>

#include <algorithm>
#include <array>
#include <cstdint>

namespace tracemod::kernels::detail {

/// Upper bounds of the blocks (sizes of stack tables); the blocks themselves come from gemm_blocking().
inline constexpr std::int64_t gemm_kc = 1024;
inline constexpr std::int64_t gemm_nc = 1024;
/// At most this many columns past a block's last whole vector are computed as dot products.
inline constexpr std::int64_t gemm_dot_columns = simd_width / 4;

struct gemm_blocking_t {
  std::int64_t kc, nc;  ///< largest k and n extents of a packed block of op(B)
};

/// The blocking rule. The A panel (kc x MR floats) is reused by every tile of its row panel while
/// B's kc x NR micro-panels stream past it: it gets half of L1. The packed B block (kc x nc floats)
/// is reused by every row panel: it gets half of L2, the other half holding the A panels and C
/// lines passing through. kc is a multiple of 16 (whole cache lines), nc of NR.
[[nodiscard]] inline gemm_blocking_t gemm_blocking_for(const cache_sizes_t& caches) noexcept {
  constexpr auto bytes = static_cast<std::int64_t>(sizeof(float));
  const std::int64_t kc = std::clamp<std::int64_t>(caches.l1d / 2 / (gemm_mr * bytes) / 16 * 16, 64, gemm_kc);
  const std::int64_t nc = std::clamp<std::int64_t>(caches.l2 / 2 / (kc * bytes) / gemm_nr * gemm_nr, 4 * gemm_nr, gemm_nc);
  return {kc, nc};
}

/// The blocking for this machine, from its cache sizes, decided once.
[[nodiscard]] inline const gemm_blocking_t& gemm_blocking() {
  static const gemm_blocking_t b = gemm_blocking_for(cache_sizes());
  return b;
}

/// Splits `extent` into equal blocks of at most `max_block`, rounded up to a multiple of `multiple`,
/// so no block is a thin remainder.
inline std::int64_t balanced_block(std::int64_t extent, std::int64_t max_block, std::int64_t multiple) {
  const std::int64_t blocks = (extent + max_block - 1) / max_block;
  const std::int64_t block = (extent + blocks - 1) / blocks;
  return (block + multiple - 1) / multiple * multiple;
}

/// C = alpha * op(A) op(B) + bias + beta * C for m, n, k > 0, where op(A) is `a` (m x k), op(B) (k x n)
/// is supplied already packed (pack_b(dst, k0, kc, j0, nc) writes what gemm_pack_b would), and the
/// optional bias holds one value per row of C. The optional residual (laid out like C) is added and
/// `act` applied as each tile of the last k block is stored, while it is in registers (the
/// convolution epilogue).
///
/// Threads: per block of op(B), the NR-wide panels are packed in parallel into the one shared
/// buffer, then the block's output tiles (row panel x column panel, row-major) are split across
/// threads, each packing its own A panels. Every output element is computed by one thread, by the
/// same tile code over the same k blocks whatever the thread count, so results are bit-identical.
/// k is never split: that would change the summation order.
template <class PackB>
inline void gemm_blocked(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const strided_matrix& a,
                         PackB&& pack_b, float beta, const float* bias, const strided_output& c,
                         const float* residual = nullptr, activation act = activation::none) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  const gemm_blocking_t& blocking = gemm_blocking();
  const std::int64_t kc_max = balanced_block(k, blocking.kc, 1);
  const std::int64_t nc_max = balanced_block(n, blocking.nc, gemm_nr);
  float* const b_panels = scratch(scratch_slot::gemm_b_panels, static_cast<std::size_t>(kc_max * nc_max));
  // Rows of op(A) that are contiguous in k are read in place; others are packed per row panel.
  const bool a_in_place = a.cs == 1;
  const std::int64_t row_panels = (m + gemm_mr - 1) / gemm_mr;

  for (std::int64_t j0 = 0; j0 < n; j0 += nc_max) {
    const std::int64_t nc = std::min(nc_max, n - j0);
    // A few columns past the last whole vector (49 = 3 * 16 + 1 output positions of a 7x7 conv)
    // would each cost a vector per row and k; as dot products of A's rows, read right after the
    // tiles used them, they cost a fraction of that.
    const std::int64_t dot_columns = a_in_place && nc % w <= gemm_dot_columns ? nc % w : 0;
    const std::int64_t tiled = nc - dot_columns;
    const std::int64_t tiles = (tiled + gemm_nr - 1) / gemm_nr;
    // Work items of a row panel: its tiles, then (if any) its dot-product columns.
    const std::int64_t items_per_row = tiles + (dot_columns > 0 ? 1 : 0);
    const std::int64_t panels = (nc + gemm_nr - 1) / gemm_nr;
    for (std::int64_t k0 = 0; k0 < k; k0 += kc_max) {
      const std::int64_t kc = std::min(kc_max, k - k0);
      const bool first_block = k0 == 0;  // later k blocks accumulate onto what it wrote
      const bool last_block = k0 + kc == k;  // the epilogue's residual and activation go here
      // Packing a float (a copy, or an im2col gather) costs about as long as 32 flops of the tiles.
      parallel_for(0, panels, grain_in_items(grains().gemm_flops, 32 * kc * gemm_nr), [&](std::int64_t lo, std::int64_t hi) {
        const std::int64_t first = lo * gemm_nr, last = std::min(nc, hi * gemm_nr);
        pack_b(b_panels + first * kc, k0, kc, j0 + first, last - first);
      });
      std::array<float, gemm_dot_columns * gemm_kc> columns;  // contiguous copies for the dot products
      for (std::int64_t t = 0; t < dot_columns; ++t) {
        const float* panel = b_panels + (tiled + t) / gemm_nr * gemm_nr * kc + (tiled + t) % gemm_nr;
        for (std::int64_t p = 0; p < kc; ++p) columns[t * kc + p] = panel[p * gemm_nr];
      }
      const std::int64_t items = row_panels * items_per_row;
      const std::int64_t grain = grain_in_items(grains().gemm_flops, 2 * gemm_mr * gemm_nr * kc);
      const int chunks = parallel_chunk_count(0, items, grain);
      float* const a_panels =
          a_in_place ? nullptr
                     : scratch(scratch_slot::gemm_a_panel, static_cast<std::size_t>(chunks * kc_max * gemm_mr));
      parallel_for(0, items, grain, [&](int chunk, std::int64_t lo, std::int64_t hi) {
        float* const a_panel = a_in_place ? nullptr : a_panels + chunk * kc_max * gemm_mr;
        std::int64_t packed = -1;  // the row panel a_panel holds
        for (std::int64_t item = lo; item < hi; ++item) {
          const std::int64_t panel = item / items_per_row, t = item % items_per_row;
          const std::int64_t i0 = panel * gemm_mr, rows = std::min(gemm_mr, m - i0);
          if (!a_in_place && packed != panel) {
            gemm_pack_a(a, i0, rows, k0, kc, a_panel);
            packed = panel;
          }
          const float* a_src = a_in_place ? a.data + i0 * a.rs + k0 : a_panel;
          gemm_epilogue epilogue{alpha, first_block ? beta : 1.0f, first_block && bias != nullptr ? bias + i0 : nullptr};
          if (last_block) epilogue.act = act;
          const auto residual_at = [&](std::int64_t j) {
            return last_block && residual != nullptr ? residual + i0 * c.rs + j * c.cs : nullptr;
          };
          if (t < tiles) {
            const std::int64_t jp = t * gemm_nr, cols = std::min(gemm_nr, tiled - jp);
            epilogue.residual = residual_at(j0 + jp);
            gemm_tile_update_for(rows, cols, !a_in_place)(kc, a_src, a.rs, b_panels + jp * kc, cols, epilogue,
                                                          c.data + i0 * c.rs + (j0 + jp) * c.cs, c.rs, c.cs);
            continue;
          }
          for (std::int64_t d = 0; d < dot_columns; ++d) {
            const std::int64_t j = j0 + tiled + d;
            float* y = c.data + i0 * c.rs + j * c.cs;
            gemm_dot_rows(i0, rows, kc, alpha, strided_matrix{a.data + k0, a.rs, 1}, columns.data() + d * kc,
                          epilogue.beta, first_block ? bias : nullptr, c.data + j * c.cs, c.rs);
            if (epilogue.act != activation::none || residual_at(j) != nullptr)
              gemm_finish_run(y, rows, c.rs, residual_at(j), epilogue.act);
          }
        }
      });
    }
  }
}

/// Rough cycle count of gemm_blocked with these operands, to choose between computing C and C^T:
/// FMA work padded to whole NR panels, packing (a transposing copy costs ~4x a row copy), and
/// element-wise stores of each k block when C's rows are not contiguous.
inline double gemm_estimated_cycles(std::int64_t m, std::int64_t n, std::int64_t k, const strided_matrix& a,
                                    const strided_matrix& b, const strided_output& c) {
  const auto copy_cost = [](bool contiguous) { return contiguous ? 0.25 : 1.0; };
  const double n_padded = static_cast<double>((n + gemm_nr - 1) / gemm_nr * gemm_nr);
  const double fma = static_cast<double>(m) * n_padded * static_cast<double>(k) / (2.0 * simd_width);
  const double pack_b = static_cast<double>(k) * static_cast<double>(n) * copy_cost(b.cs == 1);
  const double pack_a = a.cs == 1 ? 0.0
                                  : static_cast<double>(m) * static_cast<double>(k) *
                                        static_cast<double>((n + gemm_blocking().nc - 1) / gemm_blocking().nc) * copy_cost(a.rs == 1);
  const double store = c.cs == 1 ? 0.0
                                  : static_cast<double>(m) * static_cast<double>(n) *
                                        static_cast<double>((k + gemm_blocking().kc - 1) / gemm_blocking().kc);
  return fma + pack_b + pack_a + store;
}

}  // namespace tracemod::kernels::detail
