// Direct convolution of one plane by one r x s filter: the depthwise case (one input channel per
// group), where an im2col GEMM would have a reduction of only r * s and mostly pack.
#pragma once

#include <tracemod/kernels/detail/conv_im2col.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <utility>

namespace tracemod::kernels::detail {

struct conv_plane_window {
  std::int64_t h, w, out_h, out_w;
  std::int64_t r, s;
  std::int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
};

/// One vector of input pixels spaced `stride` apart: a load, a gather with 32-bit lane offsets
/// `lanes` (lane * stride) while those fit, element by element otherwise.
inline fbatch conv_strided_pixels(const float* p, std::int64_t stride, const xsimd::batch<std::int32_t, arch>& lanes,
                                  bool gather_fits) {
  if (stride == 1) return fbatch::load_unaligned(p);
  if (gather_fits) return fbatch::gather(p, lanes);
  alignas(buffer_alignment) std::array<float, simd_width> pixels;
  for (std::size_t l = 0; l < simd_width; ++l) pixels[l] = p[static_cast<std::int64_t>(l) * stride];
  return fbatch::load_aligned(pixels.data());
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

/// Output vectors t0 + J of a plane (vector t covers row t / row_vectors, columns from
/// (t % row_vectors) * W): each accumulates in its own register through all r x s taps, so the
/// J independent chains hide the FMA latency.
template <std::int64_t... J>
inline void conv_depthwise_vectors(std::integer_sequence<std::int64_t, J...>, std::int64_t t0,
                                   std::int64_t row_vectors, const conv_plane_window& g, const float* padded,
                                   std::int64_t wp, const float* filter, float bias, float* y) {
  constexpr auto width = static_cast<std::int64_t>(simd_width);
  const bool gather_fits = g.stride_w <= std::numeric_limits<std::int32_t>::max() / width;
  const auto lanes = xsimd::batch<std::int32_t, arch>::load_aligned(conv_lane_ids32.data()) *
                     xsimd::batch<std::int32_t, arch>(static_cast<std::int32_t>(gather_fits ? g.stride_w : 0));
  const std::array<std::int64_t, sizeof...(J)> row{(t0 + J) / row_vectors...};
  const std::array<std::int64_t, sizeof...(J)> col{(t0 + J) % row_vectors * width...};
  const std::array<const float*, sizeof...(J)> in{(padded + row[J] * g.stride_h * wp + col[J] * g.stride_w)...};
  std::array<fbatch, sizeof...(J)> acc;
  ((acc[J] = fbatch(bias)), ...);
  for (std::int64_t ry = 0; ry < g.r; ++ry) {
    for (std::int64_t sx = 0; sx < g.s; ++sx) {
      const fbatch tap(filter[ry * g.s + sx]);
      const std::int64_t shift = ry * g.dil_h * wp + sx * g.dil_w;
      ((acc[J] = xsimd::fma(tap, conv_strided_pixels(in[J] + shift, g.stride_w, lanes, gather_fits), acc[J])), ...);
    }
  }
  // A row's last vector may spill whole into the following rows, whose vectors are stored after it
  // (later in this fold or in a later call); only the plane's end must not be crossed.
  const std::int64_t plane_end = g.out_h * g.out_w;
  (conv_store_columns(acc[J], std::min(width, plane_end - row[J] * g.out_w - col[J]), y + row[J] * g.out_w + col[J]),
   ...);
}

/// y = bias + x (*) filter for one h x w plane, from a copy of the plane with its zero padding plus
/// slack, so whole vectors may run past the last output column of a row.
inline void conv_depthwise_plane(const conv_plane_window& g, const float* x, const float* filter, float bias,
                                 float* y) {
  constexpr auto width = static_cast<std::int64_t>(simd_width);
  constexpr std::int64_t chains = 8;
  const std::int64_t hp = g.h + 2 * g.pad_h, wp = g.w + 2 * g.pad_w;
  const std::int64_t row_vectors = (g.out_w + width - 1) / width;
  // The last vector of a row reads at most width * stride_w past the row's last valid pixel.
  const std::int64_t slack = width * g.stride_w;
  float* const padded = scratch(scratch_slot::conv_input, static_cast<std::size_t>(hp * wp + slack));
  conv_pad_input(x, 1, g.h, g.w, g.pad_h, g.pad_w, padded);
  std::fill_n(padded + hp * wp, slack, 0.0f);

  const std::int64_t vectors = g.out_h * row_vectors;
  std::int64_t t = 0;
  for (; t + chains <= vectors; t += chains)
    conv_depthwise_vectors(std::make_integer_sequence<std::int64_t, chains>{}, t, row_vectors, g, padded, wp, filter,
                           bias, y);
  for (; t < vectors; ++t)
    conv_depthwise_vectors(std::make_integer_sequence<std::int64_t, 1>{}, t, row_vectors, g, padded, wp, filter,
                           bias, y);
}

}  // namespace tracemod::kernels::detail
