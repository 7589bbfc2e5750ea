// Single-precision GEMM on row-major buffers: C = alpha * op(A) op(B) + beta * C.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/kernels/detail/gemm_driver.hpp>
#include <tracemod/kernels/detail/gemm_gemv.hpp>
#include <tracemod/kernels/detail/gemm_pack.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace tracemod::kernels {

namespace detail {

inline void gemm_check(const char* op, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                       std::int64_t lda, std::int64_t ldb, std::int64_t ldc) {
  if (m < 0 || n < 0 || k < 0)
    throw value_error(std::string(op) + ": sizes must be non-negative, got M=" + std::to_string(m) +
                      " N=" + std::to_string(n) + " K=" + std::to_string(k));
  const auto check_ld = [op](const char* name, std::int64_t ld, std::int64_t rows, std::int64_t cols) {
    if (rows > 0 && ld < cols)
      throw value_error(std::string(op) + ": " + name + "=" + std::to_string(ld) + " is smaller than the " +
                        std::to_string(cols) + " columns of the stored matrix");
  };
  check_ld("lda", lda, trans_a ? k : m, trans_a ? m : k);
  check_ld("ldb", ldb, trans_b ? n : k, trans_b ? k : n);
  check_ld("ldc", ldc, m, n);
}

/// C = beta * C, with beta == 0 writing zeros whatever C held.
inline void gemm_scale(std::int64_t m, std::int64_t n, float beta, float* c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.0f)
      std::fill_n(row, n, 0.0f);
    else if (beta != 1.0f)
      std::for_each(row, row + n, [beta](float& x) { x *= beta; });
  }
}

}  // namespace detail

/// C[M,N] = alpha * op(A) * op(B) + beta * C, all row-major; op(X) is X or X^T per trans flag.
/// A is M x K (K x M when trans_a), B is K x N (N x K when trans_b); lda/ldb/ldc are row strides in
/// elements. beta == 0 makes C write-only (even NaNs in it are ignored); alpha == 0 or K == 0 leaves
/// A and B unread. Throws value_error for negative sizes or leading dimensions below the row width.
inline void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                 const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                 std::int64_t ldc) {
  detail::gemm_check("gemm", trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.0f) {
    detail::gemm_scale(M, N, beta, C, ldc);
    return;
  }
  const detail::strided_matrix a = trans_a ? detail::strided_matrix{A, 1, lda} : detail::strided_matrix{A, lda, 1};
  const detail::strided_matrix b = trans_b ? detail::strided_matrix{B, 1, ldb} : detail::strided_matrix{B, ldb, 1};
  if (M == 1) {  // a row vector times op(B): each C(0, j) is a dot product with column j of op(B)
    detail::gemm_gemv(N, K, alpha, b.transposed(), A, a.cs, beta, C, 1);
    return;
  }
  if (N == 1) {  // op(A) times a column vector
    detail::gemm_gemv(M, K, alpha, a, B, b.rs, beta, C, ldc);
    return;
  }
  const detail::strided_output c{C, ldc, 1};
  const detail::strided_output c_transposed{C, 1, ldc};
  const auto packer = [](const detail::strided_matrix& v) {
    return [v](float* dst, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t nc) {
      detail::gemm_pack_b(v, k0, kc, j0, nc, dst);
    };
  };
  // Computing C^T = op(B)^T op(A)^T instead pays off when it avoids padding or a transposing pack
  // of the larger operand (e.g. nn.Linear: a small batch times transposed weights).
  const double direct = detail::gemm_estimated_cycles(M, N, K, a, b, c);
  const double swapped = detail::gemm_estimated_cycles(N, M, K, b.transposed(), a.transposed(), c_transposed);
  if (direct <= swapped)
    detail::gemm_blocked(M, N, K, alpha, a, packer(b), beta, nullptr, c);
  else
    detail::gemm_blocked(N, M, K, alpha, b.transposed(), packer(a.transposed()), beta, nullptr, c_transposed);
}

/// The textbook triple loop with float accumulation: the independent reference for tests. Same
/// contract as gemm, including that alpha == 0 ignores A and B.
inline void gemm_reference(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                           const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                           std::int64_t ldc) {
  detail::gemm_check("gemm_reference", trans_a, trans_b, M, N, K, lda, ldb, ldc);
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (std::int64_t p = 0; p < K; ++p)
        sum += (trans_a ? A[p * lda + i] : A[i * lda + p]) * (trans_b ? B[j * ldb + p] : B[p * ldb + j]);
      float& c = C[i * ldc + j];
      const float product = alpha == 0.0f ? 0.0f : alpha * sum;
      c = beta == 0.0f ? product : product + beta * c;
    }
  }
}

}  // namespace tracemod::kernels
