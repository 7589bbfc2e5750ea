// Direct convolution of one plane by one r x s filter: the depthwise case (one input channel per
// group), where an im2col GEMM would have a reduction of only r * s and mostly pack.
//
// A strided convolution reads every stride_w-th input column. Instead of gathering them, the
// padded copy of the plane the kernel makes anyway is stored de-interleaved: stride_w phase planes,
// phase p holding columns p, p + stride_w, ... Tap (ry, sx) of output column ox then reads column
// ox + sx * dil_w / stride_w of phase sx * dil_w % stride_w, so every read is a unit-stride vector
// load, whatever the stride.
#pragma once

#include <tracemod/kernels/detail/activation.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace tracemod::kernels::detail {

struct conv_plane_window {
  std::int64_t h, w, out_h, out_w;
  std::int64_t r, s;
  std::int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
};

/// The padded, de-interleaved copy of a plane: phase p, row y, column q at
/// data[(p * rows + y) * pitch + q] holds padded column q * stride_w + p (zero past the padding).
struct conv_phase_planes {
  std::int64_t rows, pitch, phases;

  explicit conv_phase_planes(const conv_plane_window& g)
      : rows(g.h + 2 * g.pad_h), pitch((g.w + 2 * g.pad_w + g.stride_w - 1) / g.stride_w), phases(g.stride_w) {}

  /// Floats to allocate: the planes plus one vector of slack, since the last vector of an output
  /// row may read up to a vector past its row's last valid column.
  [[nodiscard]] std::int64_t floats() const { return phases * rows * pitch + static_cast<std::int64_t>(simd_width); }

  /// Offset of tap (ry, sx) from an output pixel's origin.
  [[nodiscard]] std::int64_t tap_offset(const conv_plane_window& g, std::int64_t ry, std::int64_t sx) const {
    const std::int64_t col = sx * g.dil_w;
    return (col % phases * rows + ry * g.dil_h) * pitch + col / phases;
  }
};

/// Writes x (h x w) into `dst` laid out as `planes` describes, zeros in the padding and slack.
inline void conv_deinterleave_plane(const conv_plane_window& g, const conv_phase_planes& planes, const float* x,
                                    float* dst) {
  std::fill_n(dst, planes.floats(), 0.0f);
  const std::int64_t s = planes.phases;
  for (std::int64_t y = 0; y < g.h; ++y) {
    const float* src = x + y * g.w;
    float* row = dst + (g.pad_h + y) * planes.pitch;
    if (s == 1) {
      std::copy_n(src, g.w, row + g.pad_w);
      continue;
    }
    const std::int64_t phase_stride = planes.rows * planes.pitch;
    if (s == 2) {  // one sequential pass that the compiler turns into vector shuffles
      const std::int64_t odd = g.pad_w % 2;  // input column 0 lands in phase pad_w % 2
      float* even_phase = row + odd * phase_stride + g.pad_w / 2;
      float* odd_phase = row + (1 - odd) * phase_stride + (g.pad_w + 1) / 2;
      const std::int64_t pairs = g.w / 2;
      for (std::int64_t q = 0; q < pairs; ++q) {
        even_phase[q] = src[2 * q];
        odd_phase[q] = src[2 * q + 1];
      }
      if (g.w % 2 != 0) even_phase[pairs] = src[g.w - 1];
      continue;
    }
    // Phase p holds the padded columns p, p + s, ...: input columns p - pad_w, p - pad_w + s, ...
    for (std::int64_t p = 0; p < s; ++p) {
      const std::int64_t first = (p - g.pad_w % s + s) % s;  // first input column of phase p
      float* phase = row + p * phase_stride + (first + g.pad_w) / s;
      for (std::int64_t col = first, q = 0; col < g.w; col += s, ++q) phase[q] = src[col];
    }
  }
}

/// The first `count` lanes of x to out.
inline void conv_store_columns(const fbatch& x, std::int64_t count, float* out) {
  if (count == static_cast<std::int64_t>(simd_width)) {
    x.store_unaligned(out);
    return;
  }
  alignas(buffer_alignment) std::array<float, simd_width> lanes;
  x.store_aligned(lanes.data());
  std::copy_n(lanes.data(), count, out);
}

/// The first `count` floats at `in` as a vector, the other lanes zero.
inline fbatch conv_load_columns(const float* in, std::int64_t count) {
  if (count == static_cast<std::int64_t>(simd_width)) return fbatch::load_unaligned(in);
  alignas(buffer_alignment) std::array<float, simd_width> lanes{};
  std::copy_n(in, count, lanes.data());
  return fbatch::load_aligned(lanes.data());
}

/// What the depthwise kernel does to an output vector before storing it: adds the residual plane
/// (laid out like the output; null for none) and applies the activation.
struct conv_plane_epilogue {
  const float* residual = nullptr;
  activation act = activation::none;
};

/// Output vectors t0 + J of a plane (vector t covers row t / row_vectors, columns from
/// (t % row_vectors) * W): each accumulates in its own register through all taps, so the J
/// independent chains hide the FMA latency.
template <std::int64_t... J>
inline void conv_depthwise_vectors(std::integer_sequence<std::int64_t, J...>, std::int64_t t0,
                                   std::int64_t row_vectors, const conv_plane_window& g, const float* planes,
                                   std::int64_t pitch, const std::int64_t* tap_offsets, const float* filter,
                                   float bias, const conv_plane_epilogue& epilogue, float* y) {
  constexpr auto width = static_cast<std::int64_t>(simd_width);
  const std::array<std::int64_t, sizeof...(J)> row{(t0 + J) / row_vectors...};
  const std::array<std::int64_t, sizeof...(J)> col{(t0 + J) % row_vectors * width...};
  const std::array<const float*, sizeof...(J)> in{(planes + row[J] * g.stride_h * pitch + col[J])...};
  std::array<fbatch, sizeof...(J)> acc;
  ((acc[J] = fbatch(bias)), ...);
  for (std::int64_t tap = 0, taps = g.r * g.s; tap < taps; ++tap) {
    const fbatch weight(filter[tap]);
    const std::int64_t shift = tap_offsets[tap];
    ((acc[J] = xsimd::fma(weight, fbatch::load_unaligned(in[J] + shift), acc[J])), ...);
  }
  // A row's last vector may spill whole into the following rows, whose vectors are stored after it
  // (later in this fold or in a later call); only the plane's end must not be crossed.
  const std::int64_t plane_end = g.out_h * g.out_w;
  const std::array<std::int64_t, sizeof...(J)> at{(row[J] * g.out_w + col[J])...};
  const std::array<std::int64_t, sizeof...(J)> count{std::min(width, plane_end - at[J])...};
  if (epilogue.residual != nullptr) ((acc[J] = acc[J] + conv_load_columns(epilogue.residual + at[J], count[J])), ...);
  if (epilogue.act != activation::none) ((acc[J] = activate(epilogue.act, acc[J])), ...);
  (conv_store_columns(acc[J], count[J], y + at[J]), ...);
}

/// y = act(bias + x (*) filter + residual) for one h x w plane.
inline void conv_depthwise_plane(const conv_plane_window& g, const float* x, const float* filter, float bias,
                                 float* y, const conv_plane_epilogue& epilogue = {}) {
  constexpr auto width = static_cast<std::int64_t>(simd_width);
  constexpr std::int64_t chains = 8;
  const conv_phase_planes planes(g);
  float* const copy = scratch(scratch_slot::conv_input, static_cast<std::size_t>(planes.floats()));
  conv_deinterleave_plane(g, planes, x, copy);
  thread_local std::vector<std::int64_t> tap_offsets;
  tap_offsets.resize(static_cast<std::size_t>(g.r * g.s));
  for (std::int64_t ry = 0; ry < g.r; ++ry)
    for (std::int64_t sx = 0; sx < g.s; ++sx) tap_offsets[ry * g.s + sx] = planes.tap_offset(g, ry, sx);

  const std::int64_t row_vectors = (g.out_w + width - 1) / width;
  const std::int64_t vectors = g.out_h * row_vectors;
  std::int64_t t = 0;
  for (; t + chains <= vectors; t += chains)
    conv_depthwise_vectors(std::make_integer_sequence<std::int64_t, chains>{}, t, row_vectors, g, copy, planes.pitch,
                           tap_offsets.data(), filter, bias, epilogue, y);
  // Small planes (7x7: seven vectors) would otherwise run one latency-bound chain at a time.
  for (; t + chains / 2 <= vectors; t += chains / 2)
    conv_depthwise_vectors(std::make_integer_sequence<std::int64_t, chains / 2>{}, t, row_vectors, g, copy,
                           planes.pitch, tap_offsets.data(), filter, bias, epilogue, y);
  for (; t < vectors; ++t)
    conv_depthwise_vectors(std::make_integer_sequence<std::int64_t, 1>{}, t, row_vectors, g, copy, planes.pitch,
                           tap_offsets.data(), filter, bias, epilogue, y);
}

}  // namespace tracemod::kernels::detail
