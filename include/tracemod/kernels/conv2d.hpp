// 2-D convolution (cross-correlation, as in PyTorch) on NCHW float buffers.
#pragma once

#include <tracemod/core/checked.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/activation.hpp>
#include <tracemod/kernels/detail/conv_depthwise.hpp>
#include <tracemod/kernels/detail/conv_direct.hpp>
#include <tracemod/kernels/detail/conv_im2col.hpp>
#include <tracemod/kernels/detail/conv_winograd.hpp>
#include <tracemod/kernels/detail/gemm_driver.hpp>
#include <tracemod/kernels/detail/gemm_small_k.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

/// What a convolution does to its output while each tile is still in registers or cache: out =
/// act(conv + bias[channel] + residual). Each step rounds as the separate kernel would (conv with
/// bias, then an elementwise add, then relu / relu6), so the fused result has the bits of the
/// unfused chain.
struct conv2d_epilogue {
  const float* bias = nullptr;      ///< [k] or null
  const float* residual = nullptr;  ///< [n, k, out_h, out_w] (the output's layout) or null; may not alias out
  activation act = activation::none;
};

/// How conv2d computes: `automatic` picks per layer (the rule and why: docs/kernels.md, "How the
/// path is chosen"); `direct` forces the direct kernels (im2col GEMM, depthwise loop, 1x1 GEMM);
/// `winograd` forces Winograd (F(4x4, 3x3), or F(2x2, 3x3) where conv2d_winograd_tile says), which
/// only 3x3 stride-1 undilated ungrouped convolutions support.
enum class conv2d_algorithm { automatic, direct, winograd };

/// The algorithm conv2d uses when its caller passes `automatic`: a process-wide switch, like
/// torch.backends flags, so whole networks can be run (and tested) with one algorithm forced.
/// Forcing `winograd` applies it to the convolutions that support it; the others stay direct.
inline void set_conv2d_algorithm(conv2d_algorithm a) noexcept;
[[nodiscard]] inline conv2d_algorithm get_conv2d_algorithm() noexcept;

namespace detail {

inline std::atomic<conv2d_algorithm>& conv2d_algorithm_setting() noexcept {
  static std::atomic<conv2d_algorithm> setting{conv2d_algorithm::automatic};
  return setting;
}

inline bool winograd_supports(const conv2d_geometry& g) {
  return g.groups == 1 && g.r == 3 && g.s == 3 && g.stride_h == 1 && g.stride_w == 1 && g.dil_h == 1 && g.dil_w == 1;
}

/// The tiling of convolution g into m x m output tiles.
inline winograd_tiling winograd_tiling_of(const conv2d_geometry& g, std::int64_t m) {
  return {g.n, g.h, g.w, g.pad_h, g.pad_w, g.out_h(), g.out_w(), m};
}

/// F(2x2, 3x3) is taken where F(4x4, 3x3) would have fewer tiles than the GEMM's register tile has
/// rows (gemm_mr) and its transformed filters (36 k c floats) exceed winograd_f2_min_filter_bytes.
/// With so few tiles each transformed filter element read serves fewer than gemm_mr tiles, and with
/// that many filters the products wait on reading them from L3 or memory (a 7x7 plane at batch 1
/// with 512 channels: 4 tiles, 37.7 MB); F(2x2) reads 2.25x less, with 4x the tiles to reuse it on,
/// for 1.8x the multiplications. The threshold lies between the sizes where each tile size was
/// measured faster (docs/kernels.md, "Winograd", tile size).
inline constexpr std::int64_t winograd_f2_min_filter_bytes = std::int64_t{12} << 20;

inline std::int64_t winograd_tile_size(const conv2d_geometry& g) {
  return winograd_tiling_of(g, 4).tiles() < gemm_mr && winograd_filters_bytes<4>(g.k, g.c) > winograd_f2_min_filter_bytes
             ? 2
             : 4;
}

inline winograd_tiling winograd_tiling_of(const conv2d_geometry& g) { return winograd_tiling_of(g, winograd_tile_size(g)); }

/// The few-channel direct kernel (detail/conv_direct.hpp) takes ungrouped convolutions of a
/// spatial kernel whose reduction c * r * s is at most direct_max_taps (ResNet's 7x7 stem, 147) and
/// whose output rows fill two vectors: measured faster than the im2col GEMM and Winograd there, 2x
/// slower on a 7x7 output (docs/kernels.md, "Few input channels"). 1x1 convolutions stay GEMMs.
inline constexpr std::int64_t direct_max_taps = 147;
inline constexpr std::int64_t direct_min_out_w = 2 * static_cast<std::int64_t>(simd_width);

inline bool runs_conv_direct(const conv2d_geometry& g) {
  return g.groups == 1 && g.r * g.s > 1 && g.c * g.r * g.s <= direct_max_taps && g.out_w() >= direct_min_out_w;
}

/// Where a Winograd call's transformed filters come from: transformed on every call, or once
/// beforehand (conv2d_winograd_filters, kept by the caller).
enum class winograd_filters { per_call, prepared };

/// Tiles per call from which Winograd beats the im2col GEMM, by where its filters come from
/// (docs/kernels.md, "How the path is chosen", says why).
inline constexpr std::int64_t winograd_min_tiles = 32;
inline constexpr std::int64_t winograd_min_tiles_prepared = 16;

/// Whether a call of g runs Winograd when `preferred` is the algorithm asked for (automatic: the
/// rule above, unless the few-channel direct kernel takes g) and its filters come from `filters`.
inline bool runs_winograd(const conv2d_geometry& g, conv2d_algorithm preferred, winograd_filters filters) {
  const std::int64_t min_tiles = filters == winograd_filters::prepared ? winograd_min_tiles_prepared : winograd_min_tiles;
  return winograd_supports(g) &&
         (preferred == conv2d_algorithm::winograd ||
          (preferred == conv2d_algorithm::automatic && !runs_conv_direct(g) && winograd_tiling_of(g).tiles() >= min_tiles));
}

/// 1x1 convolution, stride 1, one group: per image, weight (k x c) times the input planes
/// (c x pixels) as they lie in memory, with no im2col copy. With at most gemm_small_k_max input
/// channels the tiles store from registers (gemm_small_k), else gemm_blocked.
inline void conv2d_pointwise(const conv2d_geometry& g, const float* input, const float* weight,
                             const conv2d_epilogue& e, float* out) {
  const std::int64_t plane = g.h * g.w;
  for (std::int64_t b = 0; b < g.n; ++b) {
    const strided_matrix columns{input + b * g.c * plane, plane, 1};
    if (g.c <= gemm_small_k_max) {
      gemm_small_k(g.k, plane, g.c, strided_matrix{weight, g.c, 1}, columns, e.bias,
                   strided_output{out + b * g.k * plane, plane, 1},
                   e.residual != nullptr ? e.residual + b * g.k * plane : nullptr, e.act);
      continue;
    }
    gemm_blocked(
        g.k, plane, g.c, 1.0f, strided_matrix{weight, g.c, 1},
        [&columns](float* dst, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t nc) {
          gemm_pack_b(columns, k0, kc, j0, nc, dst);
        },
        0.0f, e.bias, strided_output{out + b * g.k * plane, plane, 1},
        e.residual != nullptr ? e.residual + b * g.k * plane : nullptr, e.act);
  }
}

inline conv_plane_window conv_window_of(const conv2d_geometry& g) {
  return {g.h, g.w, g.out_h(), g.out_w(), g.r, g.s, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dil_h, g.dil_w};
}

/// One input channel per group (depthwise, with any number of filters per channel): each output
/// plane from its one input plane (detail/conv_depthwise.hpp). A plane's result does not depend on
/// which planes share its block, so not on the thread count.
inline void conv2d_depthwise(const conv2d_geometry& g, const float* input, const float* weight,
                             const conv2d_epilogue& e, float* out) {
  const std::int64_t kg = g.k / g.groups, taps = g.r * g.s, out_plane = g.out_h() * g.out_w();
  const conv_plane_window window = conv_window_of(g);
  parallel_for(0, g.n * g.k, 4, [&](std::int64_t lo, std::int64_t hi) {
    const auto plane = [&](std::int64_t p) {
      // No division in the common case (batch 1, one filter per channel): on 7x7 planes a 64-bit
      // division per plane measured 5-7 % of the layer.
      const std::int64_t b = g.n == 1 ? 0 : p / g.k, o = p - b * g.k, channel = kg == 1 ? o : o / kg;
      return conv_depthwise_plane{input + (b * g.c + channel) * g.h * g.w, weight + o * taps,
                                  e.bias != nullptr ? e.bias[o] : 0.0f, out + p * out_plane,
                                  e.residual != nullptr ? e.residual + p * out_plane : nullptr};
    };
    conv_depthwise_kernel kernel(window);
    kernel(lo, hi, plane, e.act);
  });
}

/// Winograd with the filters transformed on this call, into a per-thread scratch buffer.
inline void conv2d_winograd_per_call(const conv2d_geometry& g, const float* input, const float* weight,
                                     const conv2d_epilogue& e, float* out) {
  conv_winograd(winograd_tiling_of(g), g.c, g.k, input, {.weight = weight}, e.bias, out, e.residual, e.act);
}

/// Any convolution as a GEMM per image and group: weight rows times im2col columns packed straight
/// from the input, or from a padded copy made by each thread that packs (conv_padded_input).
inline void conv2d_im2col(const conv2d_geometry& g, const float* input, const float* weight, const conv2d_epilogue& e,
                          float* out) {
  const std::int64_t cg = g.c / g.groups, kg = g.k / g.groups, taps = g.r * g.s;
  const std::int64_t out_plane = g.out_h() * g.out_w();
  const std::int64_t hp = g.h + 2 * g.pad_h, wp = g.w + 2 * g.pad_w;
  const bool padded = g.pad_h > 0 || g.pad_w > 0;
  const std::uint64_t call = padded ? conv_padding_call() : 0;
  // One image and group is one GEMM. With several per thread they are split across threads, each
  // running whole GEMMs; otherwise each GEMM splits its tiles across threads itself. Either way an
  // output element is computed by the same code, so the choice does not change any bit.
  const std::int64_t gemms = g.n * g.groups;
  const std::int64_t per_gemm = 2 * kg * out_plane * cg * taps;
  const std::int64_t outer_grain =
      gemms >= 2 * get_num_threads() ? grain_in_items(grains().gemm_flops, per_gemm) : gemms;
  parallel_for(0, gemms, outer_grain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      const std::int64_t b = i / g.groups, grp = i % g.groups;
      const float* x = input + (b * g.c + grp * cg) * g.h * g.w;
      const std::int64_t y_offset = (b * g.k + grp * kg) * out_plane;
      float* y = out + y_offset;
      gemm_blocked(
          kg, out_plane, cg * taps, 1.0f, strided_matrix{weight + grp * kg * cg * taps, cg * taps, 1},
          [&](float* dst, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t nc) {
            const float* data = padded ? conv_padded_input(call, x, cg, g.h, g.w, g.pad_h, g.pad_w) : x;
            conv_pack_columns({data, hp, wp, g.out_w(), g.r, g.s, g.stride_h, g.stride_w, g.dil_h, g.dil_w}, k0, kc, j0,
                              nc, dst);
          },
          0.0f, e.bias != nullptr ? e.bias + grp * kg : nullptr, strided_output{y, out_plane, 1},
          e.residual != nullptr ? e.residual + y_offset : nullptr, e.act);
    }
  });
}

}  // namespace detail

inline void set_conv2d_algorithm(conv2d_algorithm a) noexcept { detail::conv2d_algorithm_setting().store(a); }
inline conv2d_algorithm get_conv2d_algorithm() noexcept { return detail::conv2d_algorithm_setting().load(); }

/// The output tile side m of the Winograd F(m x m, 3x3) that g runs: 4, or 2 where F(4x4) would have
/// too few tiles (detail::winograd_tile_size). Filters from conv2d_winograd_filters serve every
/// geometry with the same weight shape and tile size.
[[nodiscard]] inline std::int64_t conv2d_winograd_tile(const conv2d_geometry& g) { return detail::winograd_tile_size(g); }

/// Winograd filters of a convolution g (detail::winograd_filters_size(m, k, c) floats, m =
/// conv2d_winograd_tile(g)) from its 3x3 weight [k, c, 3, 3], for conv2d_winograd: transformed once,
/// they serve every later call (batch-1 inference of deep layers, where transforming on each call
/// costs about as much as the convolution itself).
inline aligned_floats conv2d_winograd_filters(const conv2d_geometry& g, const float* weight) {
  validate(g, "conv2d_winograd_filters");
  if (!detail::winograd_supports(g))
    throw value_error("conv2d_winograd_filters: Winograd needs a 3x3, stride-1, undilated, ungrouped convolution");
  const std::int64_t m = detail::winograd_tile_size(g);
  aligned_floats filters(static_cast<std::size_t>(detail::winograd_filters_size(m, g.k, g.c)));
  detail::winograd_transform_filters(m, g.k, g.c, weight, filters.data());
  return filters;
}

/// Whether conv2d_bias_activation would run g with Winograd if its filters were transformed once
/// beforehand (conv2d_winograd_filters, then conv2d_winograd), under the process-wide algorithm
/// setting: what a caller able to keep them (a constant weight) asks before doing so.
[[nodiscard]] inline bool conv2d_prefers_winograd_filters(const conv2d_geometry& g) {
  return detail::runs_winograd(g, get_conv2d_algorithm(), detail::winograd_filters::prepared);
}

/// conv2d_bias_activation with filters from conv2d_winograd_filters(g', weight) for a g' with the same
/// conv2d_winograd_tile as g (g itself, typically): the same bits as conv2d_bias_activation running
/// Winograd.
inline void conv2d_winograd(const conv2d_geometry& g, const float* input, const float* filters,
                            const conv2d_epilogue& e, float* out) {
  validate(g, "conv2d_winograd");
  if (!detail::winograd_supports(g))
    throw value_error("conv2d_winograd: Winograd needs a 3x3, stride-1, undilated, ungrouped convolution");
  if (g.n == 0) return;
  detail::conv_winograd(detail::winograd_tiling_of(g), g.c, g.k, input, {.kept = filters}, e.bias, out, e.residual,
                        e.act);
}

/// conv2d with filters from conv2d_winograd_filters(g, weight).
inline void conv2d_winograd(const conv2d_geometry& g, const float* input, const float* filters, const float* bias,
                            float* out) {
  conv2d_winograd(g, input, filters, conv2d_epilogue{bias}, out);
}

/// out [n, k, out_h, out_w] = act(input [n, c, h, w] (*) weight [k, c / groups, r, s] + bias [k] +
/// residual [n, k, out_h, out_w]) with bias, residual and activation from `e` (each optional),
/// applied per output tile as it is stored (MegEngine's conv_bias_activation): the one entry point
/// of every convolution, conv2d included. The residual may not alias out. Ungrouped convolutions
/// with few input channels (c * r * s <= 147, r * s > 1, out_w >= 2 vectors: image stems) run a
/// direct kernel, output vectors register-blocked over output channels straight from a
/// de-interleaved band of the input (detail/conv_direct.hpp); other 3x3 stride-1 convolutions
/// with enough tiles run Winograd F(4x4, 3x3) (F(2x2, 3x3) on few tiles); one input channel per group (depthwise) runs a
/// direct loop; unpadded stride-1 1x1 convolutions are one GEMM per image on the input as it lies;
/// everything else is a GEMM per image and group, weight rows times im2col columns packed straight
/// from the padded input.
inline void conv2d_bias_activation(const conv2d_geometry& g, const float* input, const float* weight,
                                   const conv2d_epilogue& e, float* out,
                                   conv2d_algorithm algorithm = conv2d_algorithm::automatic) {
  validate(g, "conv2d");
  if (algorithm == conv2d_algorithm::winograd && !detail::winograd_supports(g))
    throw value_error("conv2d: Winograd needs a 3x3, stride-1, undilated, ungrouped convolution, got kernel (" +
                      std::to_string(g.r) + ", " + std::to_string(g.s) + "), stride (" + std::to_string(g.stride_h) +
                      ", " + std::to_string(g.stride_w) + "), groups " + std::to_string(g.groups));
  if (g.n == 0) return;

  const conv2d_algorithm preferred = algorithm == conv2d_algorithm::automatic ? get_conv2d_algorithm() : algorithm;
  if (detail::runs_winograd(g, preferred, detail::winograd_filters::per_call)) {
    detail::conv2d_winograd_per_call(g, input, weight, e, out);
    return;
  }

  if (detail::runs_conv_direct(g)) {
    detail::conv_direct(detail::conv_window_of(g), g.n, g.c, g.k, input, weight, e.bias, e.residual, e.act, out);
    return;
  }

  if (g.c == g.groups) {
    detail::conv2d_depthwise(g, input, weight, e, out);
    return;
  }

  // Strided 1x1 convolutions stay on the im2col path: its packing samples the input as it copies,
  // which measured 0-3 % faster than subsampling first.
  if (g.groups == 1 && g.r == 1 && g.s == 1 && g.pad_h == 0 && g.pad_w == 0 && g.stride_h == 1 && g.stride_w == 1) {
    detail::conv2d_pointwise(g, input, weight, e, out);
    return;
  }

  detail::conv2d_im2col(g, input, weight, e, out);
}

/// out = input (*) weight + bias (bias may be null): conv2d_bias_activation without residual or
/// activation.
inline void conv2d(const conv2d_geometry& g, const float* input, const float* weight, const float* bias, float* out,
                   conv2d_algorithm algorithm = conv2d_algorithm::automatic) {
  conv2d_bias_activation(g, input, weight, conv2d_epilogue{bias}, out, algorithm);
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
