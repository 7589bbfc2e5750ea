// Numerically stable softmax along one axis of a tensor viewed as [outer, axis_len, inner].
#pragma once

#include <tracemod/kernels/detail/softmax_kernels.hpp>

#include <cstddef>

namespace tracemod::kernels {

/// y[o, :, i] = exp(x[o, :, i] - max) / sum(exp(x[o, :, i] - max)), PyTorch's softmax(dim) on
/// the middle axis. SIMD runs along the axis when inner == 1 and across inner otherwise.
/// y may alias x. A row containing NaN gives NaN, as in PyTorch.
inline void softmax(const float* x, float* y, std::size_t outer, std::size_t axis_len, std::size_t inner) noexcept {
  if (axis_len == 0 || inner == 0) return;
  const std::size_t block = axis_len * inner;
  for (std::size_t o = 0; o < outer; ++o) {
    if (inner == 1)
      detail::softmax_row(x + o * block, y + o * block, axis_len);
    else
      detail::softmax_block(x + o * block, y + o * block, axis_len, inner);
  }
}

}  // namespace tracemod::kernels
