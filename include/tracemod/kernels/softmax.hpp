// Numerically stable softmax along one axis of a tensor viewed as [outer, axis_len, inner].
#pragma once

#include <tracemod/kernels/detail/parallel_grain.hpp>
#include <tracemod/kernels/detail/softmax_kernels.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace tracemod::kernels {

/// y[o, :, i] = exp(x[o, :, i] - max) / sum(exp(x[o, :, i] - max)), PyTorch's softmax(dim) on
/// the middle axis. SIMD runs along the axis when inner == 1 and across inner otherwise.
/// y may alias x. A row containing NaN gives NaN, as in PyTorch.
inline void softmax(const float* x, float* y, std::size_t outer, std::size_t axis_len, std::size_t inner) noexcept {
  if (axis_len == 0 || inner == 0) return;
  const std::size_t block = axis_len * inner;
  const auto signed_size = [](std::size_t v) { return static_cast<std::int64_t>(v); };
  // Rows (or vectors of columns) split across threads; each is normalised whole by one thread.
  detail::parallel_outer_columns(
      signed_size(outer), signed_size(axis_len), signed_size(inner), inner == 1 ? 1 : signed_size(simd_width),
      [&](std::int64_t o, std::int64_t first, std::int64_t last) {
        const std::size_t at = static_cast<std::size_t>(o) * block + static_cast<std::size_t>(first);
        if (inner == 1)
          detail::softmax_row(x + at, y + at, axis_len);
        else
          detail::softmax_block(x + at, y + at, axis_len, inner, static_cast<std::size_t>(last - first));
      });
}

namespace detail {

/// f(in, out) for each column [o, :, i] of x and y viewed as [outer, axis_len, inner], its elements
/// at in[k * inner] and out[k * inner]; columns split across threads.
template <class F>
void for_each_column(const float* x, float* y, std::size_t outer, std::size_t axis_len, std::size_t inner, const F& f) {
  if (axis_len == 0 || inner == 0) return;
  const std::size_t block = axis_len * inner;
  parallel_outer_columns(static_cast<std::int64_t>(outer), static_cast<std::int64_t>(axis_len),
                         static_cast<std::int64_t>(inner), 1, [&](std::int64_t o, std::int64_t first, std::int64_t last) {
                           for (auto c = static_cast<std::size_t>(first); c < static_cast<std::size_t>(last); ++c)
                             f(x + static_cast<std::size_t>(o) * block + c, y + static_cast<std::size_t>(o) * block + c);
                         });
}

}  // namespace detail

/// y[o, :, i] = x[o, :, i] - max - log(sum(exp(x[o, :, i] - max))), PyTorch's log_softmax(dim), with
/// the sum in double. y may alias x. A row containing NaN gives NaN; a row whose maximum is
/// infinite gives x - max (NaN where x is that infinity), as PyTorch's.
inline void log_softmax(const float* x, float* y, std::size_t outer, std::size_t axis_len, std::size_t inner) noexcept {
  detail::for_each_column(x, y, outer, axis_len, inner, [&](const float* in, float* out) {
    float top = -std::numeric_limits<float>::infinity();
    for (std::size_t k = 0; k < axis_len; ++k) top = std::isnan(in[k * inner]) || in[k * inner] > top ? in[k * inner] : top;
    double sum = 0;
    for (std::size_t k = 0; k < axis_len; ++k) sum += std::exp(static_cast<double>(in[k * inner]) - top);
    const double shift = static_cast<double>(top) + std::log(sum);
    for (std::size_t k = 0; k < axis_len; ++k)
      out[k * inner] = std::isinf(top) ? in[k * inner] - top : static_cast<float>(in[k * inner] - shift);
  });
}

/// y[o, :, i] = 1 at the first maximum of x[o, :, i] (the first NaN, if any), 0 elsewhere: ONNX's
/// Hardmax. y may alias x.
inline void hardmax(const float* x, float* y, std::size_t outer, std::size_t axis_len, std::size_t inner) noexcept {
  detail::for_each_column(x, y, outer, axis_len, inner, [&](const float* in, float* out) {
    std::size_t at = 0;
    for (std::size_t k = 1; k < axis_len && !std::isnan(in[at * inner]); ++k)
      if (in[k * inner] > in[at * inner] || std::isnan(in[k * inner])) at = k;
    for (std::size_t k = 0; k < axis_len; ++k) out[k * inner] = k == at ? 1.0f : 0.0f;
  });
}

}  // namespace tracemod::kernels
