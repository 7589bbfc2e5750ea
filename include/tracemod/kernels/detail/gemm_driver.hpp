// Cache blocking around the micro-kernel (Goto/BLIS loop order, with the broadcast and vector
// roles of BLIS's x86 kernels): a kc x nc block of op(B) is packed once and stays in L2 while every
// row panel of op(A) (kc x MR, L1-resident) sweeps across its NR-wide panels.
#pragma once

#include <tracemod/kernels/detail/gemm_gemv.hpp>
#include <tracemod/kernels/detail/gemm_micro_kernel.hpp>
#include <tracemod/kernels/detail/gemm_pack.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>

#include <algorithm>
#include <array>
#include <cstdint>

namespace tracemod::kernels::detail {

/// Largest packed block of op(B): gemm_kc x gemm_nc floats = 1 MiB, half a 2 MiB L2.
inline constexpr std::int64_t gemm_kc = 512;
inline constexpr std::int64_t gemm_nc = 512;
/// At most this many columns past a block's last whole vector are computed as dot products.
inline constexpr std::int64_t gemm_dot_columns = simd_width / 4;

/// Splits `extent` into equal blocks of at most `max_block`, rounded up to a multiple of `multiple`,
/// so no block is a thin remainder.
inline std::int64_t balanced_block(std::int64_t extent, std::int64_t max_block, std::int64_t multiple) {
  const std::int64_t blocks = (extent + max_block - 1) / max_block;
  const std::int64_t block = (extent + blocks - 1) / blocks;
  return (block + multiple - 1) / multiple * multiple;
}

/// C = alpha * op(A) op(B) + bias + beta * C for m, n, k > 0, where op(A) is `a` (m x k), op(B) (k x n)
/// is supplied already packed (pack_b(dst, k0, kc, j0, nc) writes what gemm_pack_b would), and the
/// optional bias holds one value per row of C.
template <class PackB>
inline void gemm_blocked(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const strided_matrix& a,
                         PackB&& pack_b, float beta, const float* bias, const strided_output& c) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  const std::int64_t kc_max = balanced_block(k, gemm_kc, 1);
  const std::int64_t nc_max = balanced_block(n, gemm_nc, gemm_nr);
  float* const b_panels = scratch(scratch_slot::gemm_b_panels, static_cast<std::size_t>(kc_max * nc_max));
  float* const a_panel = scratch(scratch_slot::gemm_a_panel, static_cast<std::size_t>(kc_max * gemm_mr));
  // Rows of op(A) that are contiguous in k are read in place; others are packed per row panel.
  const bool a_in_place = a.cs == 1;

  for (std::int64_t j0 = 0; j0 < n; j0 += nc_max) {
    const std::int64_t nc = std::min(nc_max, n - j0);
    // A few columns past the last whole vector (49 = 3 * 16 + 1 output positions of a 7x7 conv)
    // would each cost a vector per row and k; as dot products of A's rows, read right after the
    // tiles used them, they cost a fraction of that.
    const std::int64_t dot_columns = a_in_place && nc % w <= gemm_dot_columns ? nc % w : 0;
    const std::int64_t tiled = nc - dot_columns;
    for (std::int64_t k0 = 0; k0 < k; k0 += kc_max) {
      const std::int64_t kc = std::min(kc_max, k - k0);
      const bool first_block = k0 == 0;  // later k blocks accumulate onto what it wrote
      pack_b(b_panels, k0, kc, j0, nc);
      std::array<float, gemm_dot_columns * gemm_kc> columns;  // contiguous copies for the dot products
      for (std::int64_t t = 0; t < dot_columns; ++t) {
        const float* panel = b_panels + (tiled + t) / gemm_nr * gemm_nr * kc + (tiled + t) % gemm_nr;
        for (std::int64_t p = 0; p < kc; ++p) columns[t * kc + p] = panel[p * gemm_nr];
      }
      for (std::int64_t i0 = 0; i0 < m; i0 += gemm_mr) {
        const std::int64_t rows = std::min(gemm_mr, m - i0);
        if (!a_in_place) gemm_pack_a(a, i0, rows, k0, kc, a_panel);
        const float* a_src = a_in_place ? a.data + i0 * a.rs + k0 : a_panel;
        const gemm_epilogue epilogue{alpha, first_block ? beta : 1.0f,
                                     first_block && bias != nullptr ? bias + i0 : nullptr};
        for (std::int64_t jp = 0; jp < tiled; jp += gemm_nr) {
          const std::int64_t cols = std::min(gemm_nr, tiled - jp);
          gemm_tile_update_for(rows, cols, !a_in_place)(kc, a_src, a.rs, b_panels + jp * kc, cols, epilogue,
                                                        c.data + i0 * c.rs + (j0 + jp) * c.cs, c.rs, c.cs);
        }
        for (std::int64_t t = 0; t < dot_columns; ++t)
          gemm_dot_rows(i0, rows, kc, alpha, strided_matrix{a.data + k0, a.rs, 1}, columns.data() + t * kc,
                        epilogue.beta, first_block ? bias : nullptr, c.data + (j0 + tiled + t) * c.cs, c.rs);
      }
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
                                        static_cast<double>((n + gemm_nc - 1) / gemm_nc) * copy_cost(a.rs == 1);
  const double store = c.cs == 1 ? 0.0
                                  : static_cast<double>(m) * static_cast<double>(n) *
                                        static_cast<double>((k + gemm_kc - 1) / gemm_kc);
  return fma + pack_b + pack_a + store;
}

}  // namespace tracemod::kernels::detail
