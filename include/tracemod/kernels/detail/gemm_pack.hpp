// Copies blocks of the GEMM operands into the layouts the micro-kernel streams: op(B) as NR-wide
// k-major panels (zero-padded past the last column), op(A) as an MR-interleaved k-major panel.
#pragma once

#include <tracemod/kernels/detail/gemm_micro_kernel.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <cstdint>

namespace tracemod::kernels::detail {

/// A read-only matrix addressed as data[i * rs + j * cs]: covers both transposes of a row-major
/// matrix and the transposed view used when C is computed as C^T = op(B)^T op(A)^T.
struct strided_matrix {
  const float* data;
  std::int64_t rs, cs;
  [[nodiscard]] strided_matrix transposed() const { return {data, cs, rs}; }
};

/// The output matrix, addressed like strided_matrix.
struct strided_output {
  float* data;
  std::int64_t rs, cs;
};

/// Rows [k0, k0 + kc) x columns [j0, j0 + nc) of b, as ceil(nc / NR) panels of kc x gemm_nr floats.
inline void gemm_pack_b(const strided_matrix& b, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t nc,
                        float* dst) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  constexpr std::int64_t k_chunk = 64;
  // Rows of op(B) contiguous, whole panels: vector copies, k outer so each row of the block is one
  // sequential read.
  const std::int64_t full_cols = b.cs == 1 ? nc / gemm_nr * gemm_nr : 0;
  for (std::int64_t k = 0; k < kc && full_cols > 0; ++k) {
    const float* src = b.data + (k0 + k) * b.rs + j0;
    for (std::int64_t jp = 0; jp < full_cols; jp += gemm_nr)
      for (std::int64_t j = 0; j < gemm_nr; j += w)
        fbatch::load_unaligned(src + jp + j).store_aligned(dst + jp * kc + k * gemm_nr + j);
  }
  // The rest (a last partial panel, or all of a transposed op(B)) element by element, by chunks of k
  // so the panel rows being written stay in L1.
  for (std::int64_t jp = full_cols; jp < nc; jp += gemm_nr) {
    const std::int64_t cols = std::min(gemm_nr, nc - jp);
    const float* src = b.data + k0 * b.rs + (j0 + jp) * b.cs;
    float* panel = dst + jp * kc;
    for (std::int64_t kb = 0; kb < kc; kb += k_chunk) {
      const std::int64_t ke = std::min(kc, kb + k_chunk);
      for (std::int64_t j = 0; j < cols; ++j)
        for (std::int64_t k = kb; k < ke; ++k) panel[k * gemm_nr + j] = src[k * b.rs + j * b.cs];
      for (std::int64_t k = kb; k < ke; ++k) std::fill(panel + k * gemm_nr + cols, panel + (k + 1) * gemm_nr, 0.0f);
    }
  }
}

/// Rows [i0, i0 + rows) x columns [k0, k0 + kc) of a, k-major: dst[k * gemm_mr + i].
inline void gemm_pack_a(const strided_matrix& a, std::int64_t i0, std::int64_t rows, std::int64_t k0, std::int64_t kc,
                        float* dst) {
  const float* src = a.data + i0 * a.rs + k0 * a.cs;
  if (a.rs == 1) {
    // A whole panel's rows copied with a compile-time length: a few vector moves per k instead of
    // a memmove call.
    if (rows == gemm_mr)
      for (std::int64_t k = 0; k < kc; ++k) std::copy_n(src + k * a.cs, gemm_mr, dst + k * gemm_mr);
    else
      for (std::int64_t k = 0; k < kc; ++k) std::copy_n(src + k * a.cs, rows, dst + k * gemm_mr);
  } else {
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t k = 0; k < kc; ++k) dst[k * gemm_mr + i] = src[i * a.rs + k * a.cs];
  }
}

}  // namespace tracemod::kernels::detail
