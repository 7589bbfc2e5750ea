// The one SIMD loop behind every contiguous elementwise kernel.
#pragma once

#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <cstdint>

namespace tracemod::kernels::detail {

/// Runs an operation's batch code on broadcast floats: a scalar call gives the same bits as the
/// same value in any lane of a kernel.
template <class Op, class... Floats>
[[nodiscard]] float on_one_lane(const Op& op, Floats... xs) noexcept {
  return op(fbatch(xs)...).get(0);
}

/// An operand that is a contiguous array (any alignment).
struct array_operand {
  const float* data;

  [[nodiscard]] fbatch load(std::int64_t i) const noexcept { return fbatch::load_unaligned(data + i); }
  /// Elements [i, i + count) with count < simd_width, zero-padded to a full batch.
  [[nodiscard]] fbatch load_partial(std::int64_t i, std::int64_t count) const noexcept {
    alignas(buffer_alignment) float buf[simd_width] = {};
    std::copy_n(data + i, count, buf);
    return fbatch::load_aligned(buf);
  }
};

/// An operand that is one value for every element.
struct scalar_operand {
  fbatch value;

  [[nodiscard]] fbatch load(std::int64_t) const noexcept { return value; }
  [[nodiscard]] fbatch load_partial(std::int64_t, std::int64_t) const noexcept { return value; }
};

/// y[i] = f(xs[i]...) for 0 <= i < n, always a full batch at a time: the last n % simd_width
/// elements are computed in a padded stack batch, never by a scalar path, so an element's bits do
/// not depend on its position (a fused loop over the same ops agrees with the eager kernels).
/// y may alias an array operand exactly: every batch is loaded before it is stored.
template <class F, class... Operands>
void transform(const F& f, float* y, std::int64_t n, Operands... xs) {
  constexpr auto width = static_cast<std::int64_t>(simd_width);
  std::int64_t i = 0;
  for (; i + width <= n; i += width) f(xs.load(i)...).store_unaligned(y + i);
  if (i < n) {
    alignas(buffer_alignment) float buf[simd_width];
    f(xs.load_partial(i, n - i)...).store_aligned(buf);
    std::copy_n(buf, n - i, y + i);
  }
}

}  // namespace tracemod::kernels::detail
