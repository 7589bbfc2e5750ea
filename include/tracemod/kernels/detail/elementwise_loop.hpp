// The one SIMD loop behind every contiguous elementwise kernel.
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>
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
  /// The operand as seen from element i on.
  [[nodiscard]] array_operand from(std::int64_t i) const noexcept { return {data + i}; }
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
  [[nodiscard]] scalar_operand from(std::int64_t) const noexcept { return *this; }
  [[nodiscard]] fbatch load_partial(std::int64_t, std::int64_t) const noexcept { return value; }
};

/// Calls body(lo, hi) over chunks of [0, n) split across threads at multiples of simd_width, at
/// least grains().elementwise elements each: the loop every elementwise pass (eager kernels and the
/// tracer's fused loop) runs on threads through.
template <class Body>
void parallel_elements(std::int64_t n, const Body& body) {
  constexpr auto width = static_cast<std::int64_t>(simd_width);
  const std::int64_t batches = (n + width - 1) / width;
  parallel_for(0, batches, grain_in_items(grains().elementwise, width), [&](std::int64_t lo, std::int64_t hi) {
    body(lo * width, std::min(n, hi * width));
  });
}

/// Calls body(first_row, last_row) over chunks of [0, rows) split across threads, for rows of
/// `inner` elements. When the rows are too few to split, a single chunk gets them all (and the
/// elementwise passes inside may split each row instead).
template <class Body>
void parallel_rows(std::int64_t rows, std::int64_t inner, const Body& body) {
  parallel_for(0, rows, grain_in_items(grains().elementwise, inner), body);
}

/// transform on one thread.
template <class F, class... Operands>
void transform_serial(const F& f, float* y, std::int64_t n, Operands... xs) {
  constexpr auto width = static_cast<std::int64_t>(simd_width);
  std::int64_t i = 0;
  for (; i + width <= n; i += width) f(xs.load(i)...).store_unaligned(y + i);
  if (i < n) {
    alignas(buffer_alignment) float buf[simd_width];
    f(xs.load_partial(i, n - i)...).store_aligned(buf);
    std::copy_n(buf, n - i, y + i);
  }
}

/// y[i] = f(xs[i]...) for 0 <= i < n, always a full batch at a time: the last n % simd_width
/// elements are computed in a padded stack batch, never by a scalar path, so an element's bits do
/// not depend on its position (a fused loop over the same ops agrees with the eager kernels, and
/// any split across threads gives the same bits). y may alias an array operand exactly: every
/// batch is loaded before it is stored.
template <class F, class... Operands>
void transform(const F& f, float* y, std::int64_t n, Operands... xs) {
  parallel_elements(n, [&](std::int64_t lo, std::int64_t hi) { transform_serial(f, y + lo, hi - lo, xs.from(lo)...); });
}

}  // namespace tracemod::kernels::detail
