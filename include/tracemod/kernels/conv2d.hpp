// 2-D convolution (cross-correlation, as in PyTorch) on NCHW float buffers.
#pragma once

#include <tracemod/core/checked.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/kernels/detail/conv_depthwise.hpp>
#include <tracemod/kernels/detail/conv_im2col.hpp>
#include <tracemod/kernels/detail/gemm_driver.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace tracemod::kernels {

namespace detail {

/// PyTorch's output extent, floor((in + 2 pad - dil (kernel - 1) - 1) / stride) + 1, clamped at 0;
/// 0 as well for a non-positive stride (which validate() rejects).
inline std::int64_t conv_out_extent(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                                    std::int64_t dil) {
  const std::int64_t span = in + 2 * pad - dil * (kernel - 1) - 1;  // floor(span / stride) + 1 <= 0 if negative
  return stride <= 0 || span < 0 ? 0 : span / stride + 1;
}

}  // namespace detail

/// Sizes of a convolution: input [n, c, h, w], weight [k, c / groups, r, s], output [n, k, out_h, out_w].
struct conv2d_geometry {
  std::int64_t n, c, h, w;  ///< input batch, channels, height, width
  std::int64_t k, r, s;     ///< output channels, kernel height, kernel width
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1, groups = 1;

  [[nodiscard]] std::int64_t out_h() const { return detail::conv_out_extent(h, r, stride_h, pad_h, dil_h); }
  [[nodiscard]] std::int64_t out_w() const { return detail::conv_out_extent(w, s, stride_w, pad_w, dil_w); }
};

/// Throws value_error for groups that do not divide both channel counts and for non-positive
/// stride / dilation or negative padding, shape_error for non-positive sizes and an empty output;
/// messages start with `op`.
inline void validate(const conv2d_geometry& g, std::string_view op) {
  const auto where = [op](const std::string& what) { return std::string(op) + ": " + what; };
  const auto pair = [](std::int64_t a, std::int64_t b) {
    return "(" + std::to_string(a) + ", " + std::to_string(b) + ")";
  };
  if (g.n < 0 || g.c <= 0 || g.h <= 0 || g.w <= 0 || g.k <= 0 || g.r <= 0 || g.s <= 0)
    throw shape_error(where("invalid sizes: input [n, c, h, w] = [" + std::to_string(g.n) + ", " +
                            std::to_string(g.c) + ", " + std::to_string(g.h) + ", " + std::to_string(g.w) +
                            "], out_channels " + std::to_string(g.k) + ", kernel " + pair(g.r, g.s)));
  if (g.groups <= 0) throw value_error(where("groups must be positive, got " + std::to_string(g.groups)));
  if (g.c % g.groups != 0)
    throw value_error(where("in_channels " + std::to_string(g.c) + " is not divisible by groups " +
                            std::to_string(g.groups)));
  if (g.k % g.groups != 0)
    throw value_error(where("out_channels " + std::to_string(g.k) + " is not divisible by groups " +
                            std::to_string(g.groups)));
  if (g.stride_h <= 0 || g.stride_w <= 0)
    throw value_error(where("stride must be positive, got " + pair(g.stride_h, g.stride_w)));
  if (g.dil_h <= 0 || g.dil_w <= 0)
    throw value_error(where("dilation must be positive, got " + pair(g.dil_h, g.dil_w)));
  if (g.pad_h < 0 || g.pad_w < 0)
    throw value_error(where("padding must be non-negative, got " + pair(g.pad_h, g.pad_w)));
  // Checked before any extent is derived from them: a huge padding or dilation must not wrap around,
  // and the padded input copy the GEMM path makes must be allocatable.
  const auto padded = [&](std::int64_t in, std::int64_t pad) {
    return checked_add(in, checked_mul(2, pad, op, "padded extent"), op, "padded extent");
  };
  const auto dilated = [&](std::int64_t dil, std::int64_t kernel) {
    return checked_add(checked_mul(dil, kernel - 1, op, "dilated kernel extent"), 1, op, "dilated kernel extent");
  };
  const std::int64_t hp = padded(g.h, g.pad_h), wp = padded(g.w, g.pad_w);
  (void)dilated(g.dil_h, g.r);
  (void)dilated(g.dil_w, g.s);
  const std::int64_t padded_input[] = {g.c / g.groups, hp, wp};
  if (checked_product(padded_input, 3, op, "padded input size") > max_tensor_bytes / std::int64_t{sizeof(float)})
    throw shape_error(where("the padded input " + pair(hp, wp) + " of " + std::to_string(g.c / g.groups) +
                            " channels per group exceeds the largest allocation"));
  if (g.out_h() <= 0 || g.out_w() <= 0)
    throw shape_error(where("empty output: input " + pair(g.h, g.w) + " padded by " + pair(g.pad_h, g.pad_w) +
                            " is smaller than the dilated kernel " +
                            pair(g.dil_h * (g.r - 1) + 1, g.dil_w * (g.s - 1) + 1)));
}

/// out [n, k, out_h, out_w] = input [n, c, h, w] (*) weight [k, c / groups, r, s] + bias [k] (bias may
/// be null). One input channel per group (depthwise) runs a direct loop; everything else is a GEMM
/// per image and group, weight rows times im2col columns packed straight from the padded input.
inline void conv2d(const conv2d_geometry& g, const float* input, const float* weight, const float* bias, float* out) {
  validate(g, "conv2d");
  const std::int64_t cg = g.c / g.groups, kg = g.k / g.groups, taps = g.r * g.s;
  const std::int64_t out_plane = g.out_h() * g.out_w();

  if (cg == 1) {
    const detail::conv_plane_window window{g.h,      g.w,      g.out_h(), g.out_w(), g.r,     g.s,
                                           g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dil_h, g.dil_w};
    for (std::int64_t b = 0; b < g.n; ++b)
      for (std::int64_t o = 0; o < g.k; ++o)
        detail::conv_depthwise_plane(window, input + (b * g.c + o / kg) * g.h * g.w, weight + o * taps,
                                     bias != nullptr ? bias[o] : 0.0f, out + (b * g.k + o) * out_plane);
    return;
  }

  const std::int64_t hp = g.h + 2 * g.pad_h, wp = g.w + 2 * g.pad_w;
  const bool padded = g.pad_h > 0 || g.pad_w > 0;
  float* const padded_input =
      padded ? detail::scratch(detail::scratch_slot::conv_input, static_cast<std::size_t>(cg * hp * wp)) : nullptr;
  for (std::int64_t b = 0; b < g.n; ++b) {
    for (std::int64_t grp = 0; grp < g.groups; ++grp) {
      const float* x = input + (b * g.c + grp * cg) * g.h * g.w;
      if (padded) detail::conv_pad_input(x, cg, g.h, g.w, g.pad_h, g.pad_w, padded_input);
      const detail::im2col_source columns{padded ? padded_input : x, hp, wp, g.out_w(), g.r, g.s,
                                          g.stride_h, g.stride_w, g.dil_h, g.dil_w};
      float* y = out + (b * g.k + grp * kg) * out_plane;
      detail::gemm_blocked(
          kg, out_plane, cg * taps, 1.0f, detail::strided_matrix{weight + grp * kg * cg * taps, cg * taps, 1},
          [&columns](float* dst, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t nc) {
            detail::conv_pack_columns(columns, k0, kc, j0, nc, dst);
          },
          0.0f, bias != nullptr ? bias + grp * kg : nullptr, detail::strided_output{y, out_plane, 1});
    }
  }
}

/// The direct seven-loop definition with float accumulation: the independent reference for tests.
inline void conv2d_reference(const conv2d_geometry& g, const float* input, const float* weight, const float* bias,
                             float* out) {
  validate(g, "conv2d_reference");
  const std::int64_t cg = g.c / g.groups, kg = g.k / g.groups;
  const std::int64_t oh = g.out_h(), ow = g.out_w();
  for (std::int64_t b = 0; b < g.n; ++b)
    for (std::int64_t o = 0; o < g.k; ++o)
      for (std::int64_t oy = 0; oy < oh; ++oy)
        for (std::int64_t ox = 0; ox < ow; ++ox) {
          float acc = bias != nullptr ? bias[o] : 0.0f;
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t ry = 0; ry < g.r; ++ry)
              for (std::int64_t sx = 0; sx < g.s; ++sx) {
                const std::int64_t iy = oy * g.stride_h - g.pad_h + ry * g.dil_h;
                const std::int64_t ix = ox * g.stride_w - g.pad_w + sx * g.dil_w;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                acc += input[((b * g.c + o / kg * cg + ci) * g.h + iy) * g.w + ix] *
                       weight[((o * cg + ci) * g.r + ry) * g.s + sx];
              }
          out[((b * g.k + o) * oh + oy) * ow + ox] = acc;
        }
}

}  // namespace tracemod::kernels
