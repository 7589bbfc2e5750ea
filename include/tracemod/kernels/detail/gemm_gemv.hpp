// Matrix-vector products: the GEMMs with M == 1 or N == 1 (batch-1 nn.Linear). Packing and NR-wide
// tiles would waste most of their work there, and the cost is reading the matrix once, so the
// matrix is streamed in place along its contiguous direction.
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/gemm_pack.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace tracemod::kernels::detail {

/// y = alpha * dot + bias + beta * y, where beta == 0 never reads y.
inline void gemv_merge(float alpha, float dot, float bias, float beta, float& y) {
  y = beta == 0.0f ? alpha * dot + bias : alpha * dot + bias + beta * y;
}

/// Rows i0 + R... of x (contiguous in p) dotted with v: one register chain per row.
template <std::int64_t... R>
inline void gemv_dot_rows(std::integer_sequence<std::int64_t, R...>, std::int64_t i0, std::int64_t k, float alpha,
                          const strided_matrix& x, const float* v, float beta, const float* bias, float* y,
                          std::int64_t incy) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  const std::int64_t k_vec = k / w * w;
  const std::array<const float*, sizeof...(R)> row{(x.data + (i0 + R) * x.rs)...};
  std::array<fbatch, sizeof...(R)> acc{};
  for (std::int64_t p = 0; p < k_vec; p += w) {
    const fbatch vp = fbatch::load_unaligned(v + p);
    ((acc[R] = xsimd::fma(fbatch::load_unaligned(row[R] + p), vp, acc[R])), ...);
  }
  std::array<float, sizeof...(R)> dot{xsimd::hadd(acc[R])...};
  for (std::int64_t p = k_vec; p < k; ++p) ((dot[R] += row[R][p] * v[p]), ...);
  (gemv_merge(alpha, dot[R], bias != nullptr ? bias[i0 + R] : 0.0f, beta, y[(i0 + R) * incy]), ...);
}

/// Rows [i0, i0 + W * sizeof...(R)) of x (contiguous in i) times v: column by column, one register
/// chain per vector of rows.
template <std::int64_t... R>
inline void gemv_axpy_rows(std::integer_sequence<std::int64_t, R...>, std::int64_t i0, std::int64_t k, float alpha,
                           const strided_matrix& x, const float* v, float beta, float* y, std::int64_t incy) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  std::array<fbatch, sizeof...(R)> acc{};
  for (std::int64_t p = 0; p < k; ++p) {
    const fbatch vp(v[p]);
    const float* column = x.data + p * x.cs + i0;
    ((acc[R] = xsimd::fma(fbatch::load_unaligned(column + R * w), vp, acc[R])), ...);
  }
  alignas(buffer_alignment) std::array<float, sizeof...(R) * simd_width> dots;
  (acc[R].store_aligned(dots.data() + R * w), ...);
  for (std::int64_t q = 0; q < static_cast<std::int64_t>(dots.size()); ++q)
    gemv_merge(alpha, dots[q], 0.0f, beta, y[(i0 + q) * incy]);
}

/// y[i * incy] = alpha * sum over p < k of x(i, p) * v[p] + bias[i] + beta * y[i * incy] for i in
/// [i0, i0 + rows), x contiguous in p, bias nullable, beta == 0 never reading y.
inline void gemm_dot_rows(std::int64_t i0, std::int64_t rows, std::int64_t k, float alpha, const strided_matrix& x,
                          const float* v, float beta, const float* bias, float* y, std::int64_t incy) {
  constexpr std::int64_t chains = 4;
  std::int64_t i = i0;
  for (; i + chains <= i0 + rows; i += chains)
    gemv_dot_rows(std::make_integer_sequence<std::int64_t, chains>{}, i, k, alpha, x, v, beta, bias, y, incy);
  for (; i < i0 + rows; ++i)
    gemv_dot_rows(std::make_integer_sequence<std::int64_t, 1>{}, i, k, alpha, x, v, beta, bias, y, incy);
}

/// gemm_gemv over rows [lo, hi) of x and y, v contiguous; lo is a multiple of 4 * W, so every row
/// takes the path (4 vectors, 1 vector, scalar) it takes in a call over all rows.
inline void gemv_rows(std::int64_t lo, std::int64_t hi, std::int64_t k, float alpha, const strided_matrix& x,
                      const float* v, float beta, float* y, std::int64_t incy) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  constexpr std::int64_t chains = 4;
  const auto one = std::make_integer_sequence<std::int64_t, 1>{};
  const auto several = std::make_integer_sequence<std::int64_t, chains>{};
  std::int64_t i = lo;
  if (x.cs == 1) {
    gemm_dot_rows(lo, hi - lo, k, alpha, x, v, beta, nullptr, y, incy);
    return;
  }
  if (x.rs == 1) {
    for (; i + chains * w <= hi; i += chains * w) gemv_axpy_rows(several, i, k, alpha, x, v, beta, y, incy);
    for (; i + w <= hi; i += w) gemv_axpy_rows(one, i, k, alpha, x, v, beta, y, incy);
  }
  for (; i < hi; ++i) {
    float dot = 0.0f;
    for (std::int64_t p = 0; p < k; ++p) dot += x.data[i * x.rs + p * x.cs] * v[p];
    gemv_merge(alpha, dot, 0.0f, beta, y[i * incy]);
  }
}

/// y[i * incy] = alpha * sum over p < k of x(i, p) * v[p * incv] + beta * y[i * incy] for i < rows,
/// beta == 0 never reading y. Rows are split across threads in groups of 4 * W, each row's dot
/// product computed whole by one thread.
inline void gemm_gemv(std::int64_t rows, std::int64_t k, float alpha, const strided_matrix& x, const float* v,
                      std::int64_t incv, float beta, float* y, std::int64_t incy) {
  constexpr std::int64_t group = 4 * static_cast<std::int64_t>(simd_width);
  if (incv != 1) {  // vector loads need v contiguous
    float* contiguous = scratch(scratch_slot::gemm_b_panels, static_cast<std::size_t>(k));
    for (std::int64_t p = 0; p < k; ++p) contiguous[p] = v[p * incv];
    v = contiguous;
  }
  const std::int64_t groups = (rows + group - 1) / group;
  const std::int64_t grain = grain_in_items(grains().gemm_flops, 2 * group * k);
  // One chunk: called directly. Through parallel_for's lambda (same split, same results) g++ 12
  // compiles the row loops 15-20 % slower at one thread (1x1000x512: 29 against 25 us).
  if (parallel_chunk_count(0, groups, grain) == 1) {
    gemv_rows(0, rows, k, alpha, x, v, beta, y, incy);
    return;
  }
  parallel_for(0, groups, grain, [&](std::int64_t lo, std::int64_t hi) {
    gemv_rows(lo * group, std::min(rows, hi * group), k, alpha, x, v, beta, y, incy);
  });
}

}  // namespace tracemod::kernels::detail
