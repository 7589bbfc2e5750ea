// 2-D pooling of NCHW tensors with PyTorch's semantics: max_pool2d, avg_pool2d, adaptive_avg_pool2d.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>
#include <tracemod/kernels/detail/pool_kernels.hpp>
#include <tracemod/kernels/detail/reduce_ops.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace tracemod::kernels {

namespace detail {

// Every geometric value must fit PyTorch's int: products of two of them then fit int64.
inline constexpr std::int64_t max_pool_extent = std::numeric_limits<std::int32_t>::max();

/// PyTorch's pooling_output_shape; 0 outside its domain (non-positive stride, out-of-range values).
[[nodiscard]] constexpr std::int64_t pool_output_extent(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                                                        std::int64_t pad, std::int64_t dilation,
                                                        bool ceil_mode) noexcept {
  for (std::int64_t v : {in, kernel, stride, pad, dilation})
    if (v < 0 || v > max_pool_extent) return 0;
  if (stride == 0) return 0;
  const std::int64_t num = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  std::int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;  // floor division
  // In ceil mode the last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return std::max<std::int64_t>(out, 0);
}

inline std::string pair(std::int64_t a, std::int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

}  // namespace detail

/// Geometry of a 2-D pooling over an [n, c, h, w] input. There is no "stride = kernel" default
/// here: callers resolve PyTorch's stride=None themselves.
struct pool2d_geometry {
  std::int64_t n = 1, c = 1, h = 1, w = 1;
  std::int64_t kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;  ///< max pooling only; avg pooling requires 1
  bool ceil_mode = false;
  bool count_include_pad = true;      ///< avg pooling only
  std::int64_t divisor_override = 0;  ///< avg pooling only; 0 means none

  /// PyTorch's output extents: floor((h + 2 pad - dilation (kernel - 1) - 1) / stride) + 1, rounded
  /// up instead in ceil_mode, where a last window starting past the input and left padding is dropped.
  [[nodiscard]] constexpr std::int64_t out_h() const noexcept {
    return detail::pool_output_extent(h, kernel_h, stride_h, pad_h, dilation_h, ceil_mode);
  }
  [[nodiscard]] constexpr std::int64_t out_w() const noexcept {
    return detail::pool_output_extent(w, kernel_w, stride_w, pad_w, dilation_w, ceil_mode);
  }
};

/// Throws unless `g` is a geometry PyTorch accepts (`op` names the caller in the message):
/// value_error for a non-positive kernel, stride or dilation, a negative padding or divisor
/// override, padding above half the kernel, values beyond int32; shape_error for negative
/// extents, an empty spatial input, or a (dilated) kernel larger than the padded input.
/// An empty batch or channel count is accepted: the output is empty too.
inline void validate(const pool2d_geometry& g, std::string_view op) {
  using detail::pair;
  const std::string name(op);
  if (g.n < 0 || g.c < 0 || g.h < 0 || g.w < 0)
    throw shape_error(name + ": negative extent in input (n, c, h, w) = (" + std::to_string(g.n) + ", " +
                      std::to_string(g.c) + ", " + std::to_string(g.h) + ", " + std::to_string(g.w) + ")");
  if (g.kernel_h <= 0 || g.kernel_w <= 0)
    throw value_error(name + ": kernel size must be positive, got " + pair(g.kernel_h, g.kernel_w));
  if (g.stride_h <= 0 || g.stride_w <= 0)
    throw value_error(name + ": stride must be positive, got " + pair(g.stride_h, g.stride_w));
  if (g.dilation_h <= 0 || g.dilation_w <= 0)
    throw value_error(name + ": dilation must be positive, got " + pair(g.dilation_h, g.dilation_w));
  if (g.pad_h < 0 || g.pad_w < 0)
    throw value_error(name + ": padding must be non-negative, got " + pair(g.pad_h, g.pad_w));
  if (g.divisor_override < 0)
    throw value_error(name + ": divisor_override must be positive (or 0 for none), got " +
                      std::to_string(g.divisor_override));
  for (std::int64_t v : {g.h, g.w, g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h,
                         g.dilation_w})
    if (v > detail::max_pool_extent)
      throw value_error(name + ": geometry value " + std::to_string(v) + " exceeds " +
                        std::to_string(detail::max_pool_extent));
  if (g.pad_h > g.kernel_h / 2 || g.pad_w > g.kernel_w / 2)
    throw value_error(name + ": padding " + pair(g.pad_h, g.pad_w) + " must be at most half the kernel size " +
                      pair(g.kernel_h, g.kernel_w));
  if (g.h == 0 || g.w == 0)
    throw shape_error(name + ": input spatial size " + pair(g.h, g.w) + " is empty");
  const std::int64_t extent_h = g.dilation_h * (g.kernel_h - 1) + 1;
  const std::int64_t extent_w = g.dilation_w * (g.kernel_w - 1) + 1;
  if (extent_h > g.h + 2 * g.pad_h || extent_w > g.w + 2 * g.pad_w)
    throw shape_error(name + ": kernel " + pair(g.kernel_h, g.kernel_w) + " with dilation " +
                      pair(g.dilation_h, g.dilation_w) + " spans " + pair(extent_h, extent_w) +
                      ", larger than the padded input " + pair(g.h + 2 * g.pad_h, g.w + 2 * g.pad_w) + " (input " +
                      pair(g.h, g.w) + ", padding " + pair(g.pad_h, g.pad_w) + "): the output would be empty");
}

namespace detail {

/// Runs planes(buf, rows, first, last) over chunks of the planes [0, count) split across threads
/// (each plane read once whole, `plane_floats` floats), every chunk with its own row buffer of
/// `buf_floats` floats and `row_pointers` row pointers. The calling thread keeps the buffers of all
/// chunks across calls (grown on demand), so steady-state pooling does not allocate.
template <class Planes>
void parallel_planes(std::int64_t count, std::int64_t plane_floats, std::int64_t buf_floats,
                     std::int64_t row_pointers, const Planes& planes) {
  const std::int64_t grain = grain_in_items(grains().plane, plane_floats);
  const auto chunks = static_cast<std::size_t>(parallel_chunk_count(0, count, grain));
  thread_local std::vector<float> buf;
  thread_local std::vector<const float*> rows;
  buf.resize(std::max(buf.size(), chunks * static_cast<std::size_t>(buf_floats)));
  rows.resize(std::max(rows.size(), chunks * static_cast<std::size_t>(row_pointers)));
  float* const bufs = buf.data();
  const float** const row_sets = rows.data();
  parallel_for(0, count, grain, [&](int chunk, std::int64_t first, std::int64_t last) {
    const auto c = static_cast<std::size_t>(chunk);
    planes(bufs + c * static_cast<std::size_t>(buf_floats), row_sets + c * static_cast<std::size_t>(row_pointers),
           first, last);
  });
}

inline pool_axis axis_h(const pool2d_geometry& g) {
  return {g.h, g.out_h(), g.kernel_h, g.stride_h, g.pad_h, g.dilation_h};
}
inline pool_axis axis_w(const pool2d_geometry& g) {
  return {g.w, g.out_w(), g.kernel_w, g.stride_w, g.pad_w, g.dilation_w};
}

}  // namespace detail

/// y[n, c, oh, ow] = max of x over the window (padding never wins; NaN propagates, as in
/// PyTorch). y holds n * c * out_h() * out_w() floats and must not overlap x.
inline void max_pool2d(const pool2d_geometry& g, const float* x, float* y) {
  validate(g, "max_pool2d");
  const detail::pool_axis ah = detail::axis_h(g), aw = detail::axis_w(g);
  const std::int64_t planes = g.n * g.c;
  if (planes == 0) return;
  detail::parallel_planes(
      planes, g.h * g.w, g.w, g.kernel_h, [&](float* buf, const float** rows, std::int64_t first, std::int64_t last) {
        for (std::int64_t p = first; p < last; ++p)
          detail::pool_plane<detail::max_op>(x + p * g.h * g.w, y + p * ah.out * aw.out, ah, aw, buf, rows);
      });
}

/// y[n, c, oh, ow] = mean of x over the window, with PyTorch's divisor: divisor_override if set;
/// else the window clipped to the padded input when count_include_pad, or clipped to the input
/// itself otherwise. Requires dilation 1 (value_error). y must not overlap x.
inline void avg_pool2d(const pool2d_geometry& g, const float* x, float* y) {
  validate(g, "avg_pool2d");
  if (g.dilation_h != 1 || g.dilation_w != 1)
    throw value_error("avg_pool2d: dilation is not supported, got " + detail::pair(g.dilation_h, g.dilation_w));
  const detail::pool_axis ah = detail::axis_h(g), aw = detail::axis_w(g);
  const std::int64_t planes = g.n * g.c;
  if (planes == 0) return;
  // Window extent along one axis counted as the divisor does.
  const auto span = [&](const detail::pool_axis& a, std::int64_t o) {
    if (!g.count_include_pad) return a.taps(o).count();
    const std::int64_t s = a.start(o);
    return std::min(s + a.kernel, a.in + a.pad) - s;
  };
  const std::int64_t lo = aw.inner_first, hi = aw.inner_end;
  detail::parallel_planes(
      planes, g.h * g.w, g.w, g.kernel_h, [&](float* buf, const float** rows, std::int64_t first, std::int64_t last) {
        for (std::int64_t p = first; p < last; ++p) {
          float* yp = y + p * ah.out * aw.out;
          detail::pool_plane<detail::sum_op>(x + p * g.h * g.w, yp, ah, aw, buf, rows);
          for (std::int64_t oh = 0; oh < ah.out; ++oh) {
            float* yr = yp + oh * aw.out;
            const bool empty_h = ah.taps(oh).count() == 0;
            const std::int64_t span_h = span(ah, oh);
            const auto divide = [&](std::int64_t ow, std::int64_t span_w) {
              // PyTorch writes 0 for a window with no input element.
              if (empty_h || aw.taps(ow).count() == 0) {
                yr[ow] = 0.0f;
                return;
              }
              yr[ow] /= static_cast<float>(g.divisor_override ? g.divisor_override : span_h * span_w);
            };
            std::int64_t ow = 0;
            for (; ow < lo; ++ow) divide(ow, span(aw, ow));
            if (!empty_h) {
              // Inner windows lie inside the input: both divisor rules count kernel_w columns.
              const fbatch d(static_cast<float>(g.divisor_override ? g.divisor_override : span_h * g.kernel_w));
              for (; ow + static_cast<std::int64_t>(simd_width) <= hi; ow += static_cast<std::int64_t>(simd_width))
                (fbatch::load_unaligned(yr + ow) / d).store_unaligned(yr + ow);
            }
            for (; ow < aw.out; ++ow) divide(ow, span(aw, ow));
          }
        }
      });
}

/// PyTorch's adaptive_avg_pool2d: output cell (i, j) averages input rows [floor(i h / out_h),
/// ceil((i + 1) h / out_h)) and columns [floor(j w / out_w), ceil((j + 1) w / out_w)).
/// Throws shape_error for negative extents, or an empty input plane with a non-empty output.
/// y must not overlap x.
inline void adaptive_avg_pool2d(const float* x, float* y, std::int64_t n, std::int64_t c, std::int64_t h,
                                std::int64_t w, std::int64_t out_h, std::int64_t out_w) {
  using detail::pair;
  if (n < 0 || c < 0 || h < 0 || w < 0 || out_h < 0 || out_w < 0)
    throw shape_error("adaptive_avg_pool2d: negative extent in input (n, c, h, w) = (" + std::to_string(n) + ", " +
                      std::to_string(c) + ", " + std::to_string(h) + ", " + std::to_string(w) + ") or output size " +
                      pair(out_h, out_w));
  for (std::int64_t v : {h, w, out_h, out_w})
    if (v > detail::max_pool_extent)
      throw value_error("adaptive_avg_pool2d: extent " + std::to_string(v) + " exceeds " +
                        std::to_string(detail::max_pool_extent));
  const std::int64_t planes = n * c;
  if (planes == 0 || out_h == 0 || out_w == 0) return;
  if (h == 0 || w == 0)
    throw shape_error("adaptive_avg_pool2d: input spatial size " + pair(h, w) + " is empty but the output size is " +
                      pair(out_h, out_w));
  if (out_h == 1 && out_w == 1) {
    // Global average (the classifier head): each plane is one contiguous block, summed as by mean,
    // then scaled by the reciprocal (one rounding more than a division, at most 1 ulp of the double).
    // No row buffers, and the shape captured by value so the loop keeps it in registers.
    const std::int64_t len = h * w;
    const auto count = static_cast<std::size_t>(len);
    const double inverse = 1.0 / static_cast<double>(len);
    parallel_for(0, planes, detail::grain_in_items(detail::grains().plane, len),
                 [=](std::int64_t first, std::int64_t last) {
                   for (std::int64_t p = first; p < last; ++p)
                     y[p] = static_cast<float>(detail::row_sum(x + p * len, count) * inverse);
                 });
    return;
  }
  const auto bin_start = [](std::int64_t i, std::int64_t in, std::int64_t out) { return i * in / out; };
  const auto bin_end = [](std::int64_t i, std::int64_t in, std::int64_t out) { return ((i + 1) * in + out - 1) / out; };
  // A bin spans at most ceil(h / out_h) + 1 rows.
  detail::parallel_planes(
      planes, h * w, w, h / out_h + 2, [&](float* buf, const float** rows, std::int64_t first, std::int64_t last) {
        for (std::int64_t p = first; p < last; ++p) {
          const float* xp = x + p * h * w;
          float* yp = y + p * out_h * out_w;
          for (std::int64_t i = 0; i < out_h; ++i) {
            const std::int64_t h0 = bin_start(i, h, out_h), h1 = bin_end(i, h, out_h);
            if (out_w == 1) {
              // Whole rows: the bin is one contiguous block.
              const std::int64_t count = (h1 - h0) * w;
              yp[i] = static_cast<float>(detail::row_sum(xp + h0 * w, static_cast<std::size_t>(count)) /
                                         static_cast<double>(count));
              continue;
            }
            const float* line = xp + h0 * w;
            if (h1 - h0 > 1) {
              for (std::int64_t r = h0; r < h1; ++r) rows[r - h0] = xp + r * w;
              detail::combine_rows<detail::sum_op>(rows, h1 - h0, buf, w);
              line = buf;
            }
            for (std::int64_t j = 0; j < out_w; ++j) {
              const std::int64_t w0 = bin_start(j, w, out_w), w1 = bin_end(j, w, out_w);
              float sum = 0;
              for (std::int64_t k = w0; k < w1; ++k) sum += line[k];
              yp[i * out_w + j] = sum / static_cast<float>((h1 - h0) * (w1 - w0));
            }
          }
        }
      });
}

}  // namespace tracemod::kernels
