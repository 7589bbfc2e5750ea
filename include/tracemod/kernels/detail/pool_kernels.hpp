// Separable 2-D window pooling of one plane: a vertical pass combines the window's input rows
// into a row buffer (contiguous SIMD), then a horizontal pass combines the window's columns of
// that buffer (SIMD with strided loads where the whole window is inside the input, scalar at
// the borders). Max and sum are both separable, so one engine serves max and average pooling.
#pragma once

#include <tracemod/kernels/detail/pool_strided_load.hpp>
#include <tracemod/kernels/detail/reduce_ops.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tracemod::kernels::detail {

struct sum_op {
  static constexpr float identity = 0.0f;
  static float apply(float acc, float v) noexcept { return acc + v; }
  static fbatch apply(const fbatch& acc, const fbatch& v) noexcept { return acc + v; }
};

/// Taps [first, last) of a window that fall inside the input.
struct tap_range {
  std::int64_t first, last;
  [[nodiscard]] std::int64_t count() const noexcept { return last - first; }
};

/// The pooling geometry along one spatial axis (validated: positive kernel, stride, dilation),
/// with the in-input taps of every window computed up front: the row loops then do no integer
/// division, which would otherwise cost more than the pooling itself.
struct pool_axis {
  std::int64_t in, out, kernel, stride, pad, dilation;
  std::vector<tap_range> windows;      ///< windows[o]: taps of window o inside the input
  std::int64_t inner_first, inner_end;  ///< windows [inner_first, inner_end) lie wholly inside

  pool_axis(std::int64_t in_, std::int64_t out_, std::int64_t kernel_, std::int64_t stride_, std::int64_t pad_,
            std::int64_t dilation_)
      : in(in_), out(out_), kernel(kernel_), stride(stride_), pad(pad_), dilation(dilation_),
        windows(static_cast<std::size_t>(out_)) {
    for (std::int64_t o = 0; o < out; ++o) {
      const std::int64_t s = start(o);
      const std::int64_t last = s >= in ? 0 : std::min(kernel, (in - 1 - s) / dilation + 1);
      const std::int64_t first = s < 0 ? (-s + dilation - 1) / dilation : 0;
      windows[static_cast<std::size_t>(o)] = {std::min(first, last), last};
    }
    inner_first = std::min(out, (pad + stride - 1) / stride);
    const std::int64_t room = in - 1 + pad - (kernel - 1) * dilation;
    inner_end = room < 0 ? inner_first : std::clamp(room / stride + 1, inner_first, out);
  }

  [[nodiscard]] std::int64_t start(std::int64_t o) const noexcept { return o * stride - pad; }
  [[nodiscard]] tap_range taps(std::int64_t o) const noexcept { return windows[static_cast<std::size_t>(o)]; }
};

template <class Op>
inline float pool_scalar(const float* row, const pool_axis& a, std::int64_t o) noexcept {
  const tap_range t = a.taps(o);
  const std::int64_t s = a.start(o);
  float acc = Op::identity;
  for (std::int64_t k = t.first; k < t.last; ++k) acc = Op::apply(acc, row[s + k * a.dilation]);
  return acc;
}

/// y[o] = Op over the taps of window o of `row`, for o < a.out; y must not overlap row.
template <class Op>
inline void pool_row(const float* row, float* y, const pool_axis& a) noexcept {
  constexpr auto width = static_cast<std::int64_t>(simd_width);
  const std::int64_t lo = a.inner_first, hi = a.inner_end;
  // Window o, tap k reads row[start(o) + k dilation]: across width consecutive outputs these
  // are width loads spaced `stride` apart. A last partial batch is shifted back to end at hi,
  // recomputing a few outputs instead of falling back to scalar code.
  const auto inner = [&](auto load) {
    for (std::int64_t next = lo; next < hi; next += width) {
      const std::int64_t o = std::min(next, hi - width);
      const float* p = row + a.start(o);
      fbatch acc(Op::identity);
      for (std::int64_t k = 0; k < a.kernel; ++k) acc = Op::apply(acc, load(p + k * a.dilation));
      acc.store_unaligned(y + o);
    }
  };
  std::int64_t scalar_from = lo;
  if (hi - lo >= width) {
    if (a.stride == 1)
      inner([](const float* p) { return fbatch::load_unaligned(p); });
    else if (a.stride == 2)
      inner([](const float* p) { return load_stride2(p); });
    else
      inner([&](const float* p) { return load_strided(p, a.stride); });
    scalar_from = hi;
  }
  for (std::int64_t o = 0; o < lo; ++o) y[o] = pool_scalar<Op>(row, a, o);
  for (std::int64_t o = scalar_from; o < a.out; ++o) y[o] = pool_scalar<Op>(row, a, o);
}

/// buf[j] = Op over rows[0, count) of rows[r][j], for j < len; count >= 2; buf overlaps no row.
template <class Op>
inline void combine_rows(const float* const* rows, std::int64_t count, float* buf, std::int64_t len) noexcept {
  constexpr auto width = static_cast<std::int64_t>(simd_width);
  if (len >= width) {
    // A last partial batch is shifted back to end at len, overlapping the previous one.
    for (std::int64_t next = 0; next < len; next += width) {
      const std::int64_t j = std::min(next, len - width);
      fbatch acc = Op::apply(fbatch::load_unaligned(rows[0] + j), fbatch::load_unaligned(rows[1] + j));
      for (std::int64_t r = 2; r < count; ++r) acc = Op::apply(acc, fbatch::load_unaligned(rows[r] + j));
      acc.store_unaligned(buf + j);
    }
    return;
  }
  for (std::int64_t j = 0; j < len; ++j) {
    float acc = Op::apply(rows[0][j], rows[1][j]);
    for (std::int64_t r = 2; r < count; ++r) acc = Op::apply(acc, rows[r][j]);
    buf[j] = acc;
  }
}

/// Op-pools one [ah.in, aw.in] plane x into the [ah.out, aw.out] plane y. `buf` holds aw.in
/// floats; `rows` holds ah.kernel pointers. An empty window gives Op::identity.
template <class Op>
inline void pool_plane(const float* x, float* y, const pool_axis& ah, const pool_axis& aw, float* buf,
                       const float** rows) noexcept {
  for (std::int64_t oh = 0; oh < ah.out; ++oh) {
    float* yr = y + oh * aw.out;
    const tap_range t = ah.taps(oh);
    const std::int64_t count = t.count();
    if (count == 0) {
      std::fill_n(yr, aw.out, Op::identity);
      continue;
    }
    for (std::int64_t k = 0; k < count; ++k) rows[k] = x + (ah.start(oh) + (t.first + k) * ah.dilation) * aw.in;
    const float* line = rows[0];
    if (count > 1) {
      combine_rows<Op>(rows, count, buf, aw.in);
      line = buf;
    }
    pool_row<Op>(line, yr, aw);
  }
}

}  // namespace tracemod::kernels::detail
