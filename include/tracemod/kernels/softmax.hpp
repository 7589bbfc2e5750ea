// Numerically stable softmax along one axis of a tensor viewed as [outer, axis_len, inner].
#pragma once

#include <tracemod/kernels/detail/parallel_grain.hpp>
#include <tracemod/kernels/detail/softmax_kernels.hpp>

#include <cstddef>
#include <cstdint>

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

}  // namespace tracemod::kernels
