// Resampling of the two trailing axes of an [N, C, H, W] float32 tensor, as PyTorch's
// F.interpolate computes it on the CPU: "nearest" (its legacy rule, src = floor(dst * scale)) and
// "bilinear" (half-pixel centres clamped at 0, or corners aligned). Source indices and weights
// are computed once per axis in float, in PyTorch's order of operations, so the indices match its
// own bit for bit; each output row is then a gather through the column tables.
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace tracemod::kernels {

/// The ratio input / output of an axis, as PyTorch's compute_scales_value: 1 / scale_factor when a
/// scale factor was given, else in / out, rounded to float.
inline float interpolate_ratio(std::int64_t in, std::int64_t out, std::optional<double> scale) noexcept {
  if (scale && *scale > 0) return static_cast<float>(1.0 / *scale);
  return static_cast<float>(in) / static_cast<float>(out);
}

/// Legacy nearest: the source index of output index `dst`, as PyTorch's kernel for contiguous NCHW
/// tensors computes it (no shortcut for kept or doubled extents: a scale factor of 1.2 that keeps 3
/// rows reads rows 0, 0, 1).
inline std::int64_t nearest_source(std::int64_t dst, std::int64_t in, float ratio) noexcept {
  return std::min(static_cast<std::int64_t>(std::floor(ratio * static_cast<float>(dst))), in - 1);
}

/// One axis of a linear resampling: output index o reads i0[o] and i1[o] with weights w0[o], w1[o].
struct linear_axis {
  std::vector<std::int64_t> i0, i1;
  std::vector<float> w0, w1;
};

inline linear_axis linear_weights(std::int64_t in, std::int64_t out, bool align_corners, std::optional<double> scale) {
  linear_axis a;
  const auto n = static_cast<std::size_t>(out);
  a.i0.resize(n);
  a.i1.resize(n);
  a.w0.resize(n);
  a.w1.resize(n);
  float ratio = 0;
  if (align_corners)
    ratio = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.f;
  else
    ratio = interpolate_ratio(in, out, scale);
  for (std::int64_t o = 0; o < out; ++o) {
    const auto k = static_cast<std::size_t>(o);
    if (out == in) {  // a copy, as PyTorch's linear kernel shortcuts it (its nearest one does not)
      a.i0[k] = a.i1[k] = o;
      a.w0[k] = 1;
      a.w1[k] = 0;
      continue;
    }
    float src = align_corners ? ratio * static_cast<float>(o) : ratio * (static_cast<float>(o) + 0.5f) - 0.5f;
    if (!align_corners && src < 0) src = 0;
    const auto i0 = static_cast<std::int64_t>(src);
    a.i0[k] = i0;
    a.i1[k] = i0 + (i0 < in - 1 ? 1 : 0);
    a.w1[k] = std::min(std::max(src - static_cast<float>(i0), 0.f), 1.f);
    a.w0[k] = 1.f - a.w1[k];
  }
  return a;
}

/// y[p, oh, ow] = x[p, rows[oh], cols[ow]] for `planes` planes of h x w into out_h x out_w.
inline void interpolate_nearest(const float* x, std::int64_t planes, std::int64_t h, std::int64_t w, std::int64_t out_h,
                                std::int64_t out_w, std::optional<double> scale_h, std::optional<double> scale_w, float* y) {
  if (planes == 0 || out_h == 0 || out_w == 0) return;
  std::vector<std::int64_t> rows(static_cast<std::size_t>(out_h)), cols(static_cast<std::size_t>(out_w));
  const float rh = interpolate_ratio(h, out_h, scale_h), rw = interpolate_ratio(w, out_w, scale_w);
  for (std::int64_t o = 0; o < out_h; ++o) rows[static_cast<std::size_t>(o)] = nearest_source(o, h, rh);
  for (std::int64_t o = 0; o < out_w; ++o) cols[static_cast<std::size_t>(o)] = nearest_source(o, w, rw);
  const std::int64_t plane_out = out_h * out_w;
  parallel_for(0, planes, detail::grain_in_items(detail::grains().plane, plane_out), [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t p = first; p < last; ++p) {
      const float* xp = x + p * h * w;
      float* yp = y + p * plane_out;
      for (std::int64_t oh = 0; oh < out_h; ++oh, yp += out_w) {
        const float* row = xp + rows[static_cast<std::size_t>(oh)] * w;
        for (std::int64_t ow = 0; ow < out_w; ++ow) yp[ow] = row[cols[static_cast<std::size_t>(ow)]];
      }
    }
  });
}

/// Bilinear: each output is h0 * (w0 * x[r0, c0] + w1 * x[r0, c1]) + h1 * (w0 * x[r1, c0] + w1 * x[r1, c1]),
/// PyTorch's nesting (the row weights outermost).
inline void interpolate_bilinear(const float* x, std::int64_t planes, std::int64_t h, std::int64_t w, std::int64_t out_h,
                                 std::int64_t out_w, bool align_corners, std::optional<double> scale_h,
                                 std::optional<double> scale_w, float* y) {
  if (planes == 0 || out_h == 0 || out_w == 0) return;
  const linear_axis rows = linear_weights(h, out_h, align_corners, scale_h);
  const linear_axis cols = linear_weights(w, out_w, align_corners, scale_w);
  const std::int64_t plane_out = out_h * out_w;
  const std::int64_t* c0 = cols.i0.data();
  const std::int64_t* c1 = cols.i1.data();
  const float* cw0 = cols.w0.data();
  const float* cw1 = cols.w1.data();
  parallel_for(0, planes, detail::grain_in_items(detail::grains().plane, 4 * plane_out), [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t p = first; p < last; ++p) {
      const float* xp = x + p * h * w;
      float* yp = y + p * plane_out;
      for (std::int64_t oh = 0; oh < out_h; ++oh, yp += out_w) {
        const auto k = static_cast<std::size_t>(oh);
        const float* r0 = xp + rows.i0[k] * w;
        const float* r1 = xp + rows.i1[k] * w;
        const float h0 = rows.w0[k], h1 = rows.w1[k];
        for (std::int64_t ow = 0; ow < out_w; ++ow) {
          const float t0 = r0[c0[ow]] * cw0[ow] + r0[c1[ow]] * cw1[ow];
          const float t1 = r1[c0[ow]] * cw0[ow] + r1[c1[ow]] * cw1[ow];
          yp[ow] = t0 * h0 + t1 * h1;
        }
      }
    }
  });
}

}  // namespace tracemod::kernels
