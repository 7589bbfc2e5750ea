// Reductions over the middle axis of a tensor viewed as [outer, len, inner], writing [outer, inner].
// Contiguous rows (inner == 1) are reduced along the row; otherwise SIMD runs across inner.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>
#include <tracemod/kernels/detail/reduce_ops.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tracemod::kernels {

namespace detail {

[[nodiscard]] constexpr std::int64_t sz(std::size_t v) noexcept { return static_cast<std::int64_t>(v); }
[[nodiscard]] constexpr std::size_t us(std::int64_t v) noexcept { return static_cast<std::size_t>(v); }

template <class Op>
inline void reduce_extremum(const float* x, float* y, std::size_t outer, std::size_t len, std::size_t inner,
                            std::string_view op) {
  if (outer == 0 || inner == 0) return;
  if (len == 0)
    throw value_error(std::string(op) + ": cannot reduce an axis of length 0 into a non-empty output of " +
                      std::to_string(outer * inner) + " elements");
  // Each output is reduced whole by one thread: splitting len would change the summation order.
  parallel_outer_columns(sz(outer), sz(len), sz(inner), inner == 1 ? 1 : sz(simd_width),
                         [&](std::int64_t o, std::int64_t first, std::int64_t last) {
                           const float* block = x + us(o) * len * inner;
                           if (inner == 1)
                             y[o] = row_reduce<Op>(block, len);
                           else
                             column_reduce<Op>(block + first, y + us(o) * inner + us(first), len, inner,
                                               us(last - first));
                         });
}

inline void reduce_sum_scaled(const float* x, float* y, std::size_t outer, std::size_t len, std::size_t inner,
                              double divisor) noexcept {
  parallel_outer_columns(sz(outer), sz(len), sz(inner), inner == 1 ? 1 : sz(column_sum_chunk),
                         [&](std::int64_t o, std::int64_t first, std::int64_t last) {
                           const float* block = x + us(o) * len * inner;
                           if (inner == 1)
                             y[o] = static_cast<float>(row_sum(block, len) / divisor);
                           else
                             column_sum(block + first, y + us(o) * inner + us(first), len, inner,
                                        us(last - first), divisor);
                         });
}

}  // namespace detail

/// y[o, i] = sum over l of x[o, l, i]. Sums accumulate in double across blocks (see row_sum);
/// an empty axis gives 0. y must not overlap x.
inline void reduce_sum(const float* x, float* y, std::size_t outer, std::size_t len, std::size_t inner) noexcept {
  detail::reduce_sum_scaled(x, y, outer, len, inner, 1.0);
}

/// y[o, i] = mean over l of x[o, l, i]; an empty axis gives NaN, as in PyTorch. y must not overlap x.
inline void reduce_mean(const float* x, float* y, std::size_t outer, std::size_t len, std::size_t inner) noexcept {
  detail::reduce_sum_scaled(x, y, outer, len, inner, static_cast<double>(len));
}

/// y[o, i] = max over l of x[o, l, i], NaN if any is NaN. Throws value_error when len == 0 and
/// the output is not empty (PyTorch's rule: the max of nothing is undefined). y must not overlap x.
inline void reduce_max(const float* x, float* y, std::size_t outer, std::size_t len, std::size_t inner) {
  detail::reduce_extremum<detail::max_op>(x, y, outer, len, inner, "reduce_max");
}

/// y[o, i] = min over l of x[o, l, i]; NaN and empty-axis rules as reduce_max.
inline void reduce_min(const float* x, float* y, std::size_t outer, std::size_t len, std::size_t inner) {
  detail::reduce_extremum<detail::min_op>(x, y, outer, len, inner, "reduce_min");
}

}  // namespace tracemod::kernels
