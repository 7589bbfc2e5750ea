// Direct convolution for few input channels (an image network's stem: 3 channels), where an im2col
// GEMM's reduction is only c * r * s long (27 for a 3x3 stem) and packing its columns costs about
// as much as the arithmetic.
//
// Output pixels are vectorised along rows: a vector holds simd_width adjacent columns of one output
// row and one output channel. Each image is computed in bands of output rows. A band's input rows
// are copied once, zero-padded and de-interleaved as the row-by-row depthwise layout is (stride_w
// phase rows per input row, phase p holding padded columns p, p + stride_w, ...), so that tap
// (ci, ry, sx) of every output vector is one unit-stride load at a fixed offset from the vector's
// origin, at any stride and dilation. The band then runs once per block of `channels` output
// channels: `chains` output vectors of all the block's channels accumulate in channels x chains
// registers, each tap loading chains input vectors and broadcasting one weight per channel, so a
// tap is channels x chains FMAs for channels + chains loads. The epilogue (residual, activation)
// runs on the registers before the store; a vector never crosses its output row (the last one of a
// row stores only the row's remaining columns).
//
// Each output is its bias plus the taps in (ci, ry, sx) order, padding zeros included, then the
// residual, then the activation, whatever band, block or thread computes it: bit-identical at any
// thread count.
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/activation.hpp>
#include <tracemod/kernels/detail/conv_depthwise.hpp>
#include <tracemod/kernels/detail/conv_tap_offsets.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace tracemod::kernels::detail {

/// Sizes of a band of output rows [y0, y1) and its de-interleaved input: band row i (padded input
/// row y0 * stride_h + i), channel ci, phase p, position q at ((i * c + ci) * phases + p) * pitch
/// + q, holding padded column q * stride_w + p (zero in the padding).
struct conv_direct_layout {
  /// Output channels of a register block and output vectors accumulated at once: 24 accumulators,
  /// 6 input vectors and a broadcast within AVX-512's 32 registers, 12 + 3 + 1 within AVX2's 16
  /// (6 chains there spill: slower than the im2col GEMM on ResNet's stem).
  static constexpr std::int64_t channels = 4;
  static constexpr std::int64_t chains = simd_width >= 16 ? 6 : 3;
  /// Input floats of a band, at most (unless one output row needs more): 48 KiB, reread from L1 or
  /// L2 once per block of output channels (3072 to 12288 measured within 5 % on the stems).
  static constexpr std::int64_t band_budget = 12288;

  conv_plane_window g;
  std::int64_t c, k;
  std::int64_t phases, pitch, row_floats, span, band_rows, row_vectors, taps, blocks;

  /// Bands of at most max_band_rows output rows (and the budget's).
  conv_direct_layout(const conv_plane_window& window, std::int64_t in_channels, std::int64_t out_channels,
                     std::int64_t max_band_rows)
      : g(window), c(in_channels), k(out_channels), phases(g.stride_w),
        pitch((g.w + 2 * g.pad_w + g.stride_w - 1) / g.stride_w), row_floats(c * phases * pitch),
        span((g.r - 1) * g.dil_h + 1),
        band_rows(std::clamp((band_budget / row_floats - span) / g.stride_h + 1, std::int64_t{1},
                             std::clamp(max_band_rows, std::int64_t{1}, g.out_h))),
        row_vectors((g.out_w + width - 1) / width), taps(c * g.r * g.s), blocks((k + channels - 1) / channels) {}

  /// Input rows of a band of `rows` output rows.
  [[nodiscard]] std::int64_t input_rows(std::int64_t rows) const { return (rows - 1) * g.stride_h + span; }
  /// Floats of a band buffer: the largest band plus one vector of slack, since the last vector of a
  /// row may read up to a vector past its row's last valid column.
  [[nodiscard]] std::int64_t band_floats() const { return input_rows(band_rows) * row_floats + width; }
  /// Floats of the packed filters: per block, tap t's weights of its channels at t * channels, then
  /// the biases.
  [[nodiscard]] std::int64_t filter_floats() const { return blocks * (taps + 1) * channels; }
  /// Offset of tap (ci, ry, sx) from an output vector's origin.
  [[nodiscard]] std::int64_t tap_offset(std::int64_t ci, std::int64_t ry, std::int64_t sx) const {
    const std::int64_t col = sx * g.dil_w;
    return ((ry * g.dil_h * c + ci) * phases + col % phases) * pitch + col / phases;
  }

  static constexpr auto width = static_cast<std::int64_t>(simd_width);
};

/// weight [k, c, r, s] and bias [k] (or null) in the layout of conv_direct_layout::filter_floats;
/// the channels past k of the last block get zero weights (computed, never stored).
inline void conv_direct_pack_filters(const conv_direct_layout& l, const float* weight, const float* bias,
                                     float* filters) {
  constexpr std::int64_t m = conv_direct_layout::channels;
  for (std::int64_t b = 0; b < l.blocks; ++b) {
    float* f = filters + b * (l.taps + 1) * m;
    for (std::int64_t j = 0; j < m; ++j) {
      const std::int64_t o = b * m + j;
      for (std::int64_t t = 0; t < l.taps; ++t) f[t * m + j] = o < l.k ? weight[o * l.taps + t] : 0.0f;
      f[l.taps * m + j] = o < l.k && bias != nullptr ? bias[o] : 0.0f;
    }
  }
}

/// One image's operands: input [c, h, w], output and residual [k, out_h, out_w] (residual null for
/// none).
struct conv_direct_image {
  const float* x;
  float* y;
  const float* residual;
};

/// One thread's share of a direct convolution: bands of output rows, each copied then computed for
/// every block of output channels.
class conv_direct_kernel {
 public:
  conv_direct_kernel(const conv_direct_layout& l, const float* filters, const std::int64_t* tap_offsets,
                     activation act)
      : l_(l), filters_(filters), tap_offsets_(tap_offsets), act_(act),
        buffer_(scratch(scratch_slot::conv_input, static_cast<std::size_t>(l.band_floats()))) {
    // The padding columns and the slack (read by discarded lanes only): no band writes them.
    std::fill_n(buffer_, l.band_floats(), 0.0f);
  }

  /// Output rows [y0, y1) of an image, y1 - y0 <= band_rows.
  void operator()(const conv_direct_image& image, std::int64_t y0, std::int64_t y1) {
    copy_band(image.x, y0, y1);
    const std::int64_t vectors = (y1 - y0) * l_.row_vectors;
    constexpr std::int64_t n = conv_direct_layout::chains;
    for (std::int64_t b = 0; b < l_.blocks; ++b) {
      const block_pass pass{image, y0, b};
      std::int64_t t = 0;
      for (; t + n <= vectors; t += n) run(std::make_integer_sequence<std::int64_t, n>{}, t, pass);
      tail<n>(t, vectors, pass);
    }
  }

 private:
  static constexpr auto width = conv_direct_layout::width;

  struct block_pass {
    const conv_direct_image& image;
    std::int64_t y0, block;
  };

  /// Band rows of output rows [y0, y1): each padded input row's channels, de-interleaved, a row
  /// above or below the image zeroed. Only data positions are written: the padding columns stay
  /// zero from one band to the next.
  void copy_band(const float* x, std::int64_t y0, std::int64_t y1) {
    const conv_plane_window& g = l_.g;
    const std::int64_t s = l_.phases, pitch = l_.pitch;
    for (std::int64_t i = 0; i < l_.input_rows(y1 - y0); ++i) {
      const std::int64_t iy = y0 * g.stride_h + i - g.pad_h;
      float* row = buffer_ + i * l_.row_floats;
      if (iy < 0 || iy >= g.h) {
        std::fill_n(row, l_.row_floats, 0.0f);
        continue;
      }
      for (std::int64_t ci = 0; ci < l_.c; ++ci)
        conv_deinterleave_row(x + (ci * g.h + iy) * g.w, g.w, g.pad_w, s, row + ci * s * pitch, pitch);
    }
  }

  /// Vectors [t, vectors) of a band, fewer than `Chains`: one register block of exactly that many.
  template <std::int64_t Chains>
  void tail(std::int64_t t, std::int64_t vectors, const block_pass& pass) const {
    if constexpr (Chains > 1) {
      if (vectors - t == Chains - 1)
        run(std::make_integer_sequence<std::int64_t, Chains - 1>{}, t, pass);
      else
        tail<Chains - 1>(t, vectors, pass);
    }
  }

  /// Output vectors t0 + J of the band, for the block's channels: each in its own register through
  /// all taps, then residual and activation, then stored (the channels past k are not).
  template <std::int64_t... J>
  [[gnu::flatten]] void run(std::integer_sequence<std::int64_t, J...>, std::int64_t t0, const block_pass& pass) const {
    constexpr std::int64_t m = conv_direct_layout::channels;
    constexpr auto each_channel = [](const auto& f) {  // f(j) for the block's channels j, j a constant
      [&f]<std::size_t... I>(std::index_sequence<I...>) {
        (f(std::integral_constant<std::size_t, I>{}), ...);
      }(std::make_index_sequence<m>{});
    };
    const std::array<std::int64_t, sizeof...(J)> row{((t0 + J) / l_.row_vectors)...};
    const std::array<std::int64_t, sizeof...(J)> col{((t0 + J) % l_.row_vectors * width)...};
    const std::array<const float*, sizeof...(J)> in{(buffer_ + row[J] * l_.g.stride_h * l_.row_floats + col[J])...};
    const float* const filters = filters_ + pass.block * (l_.taps + 1) * m;

    std::array<std::array<fbatch, sizeof...(J)>, m> acc;
    each_channel([&](auto j) { ((acc[j][J] = fbatch(filters[l_.taps * m + j])), ...); });
    for (std::int64_t tap = 0; tap < l_.taps; ++tap) {
      const std::int64_t shift = tap_offsets_[tap];
      const std::array<fbatch, sizeof...(J)> x{fbatch::load_unaligned(in[J] + shift)...};
      const float* w = filters + tap * m;
      each_channel([&](auto j) {
        const fbatch weight(w[j]);
        ((acc[j][J] = xsimd::fma(weight, x[J], acc[j][J])), ...);
      });
    }

    const std::int64_t plane = l_.g.out_h * l_.g.out_w;
    const std::array<std::int64_t, sizeof...(J)> out{((pass.y0 + row[J]) * l_.g.out_w + col[J])...};
    const std::array<std::int64_t, sizeof...(J)> count{std::min(width, l_.g.out_w - col[J])...};
    const std::int64_t stored = std::min(m, l_.k - pass.block * m);
    each_channel([&](auto j) {
      if (static_cast<std::int64_t>(j()) >= stored) return;
      const std::int64_t o = (pass.block * m + static_cast<std::int64_t>(j())) * plane;
      auto& a = acc[j];
      if (pass.image.residual != nullptr)
        ((a[J] = a[J] + conv_load_columns(pass.image.residual + o + out[J], count[J])), ...);
      if (act_ != activation::none) ((a[J] = activate(act_, a[J])), ...);
      (conv_store_columns(a[J], count[J], pass.image.y + o + out[J]), ...);
    });
  }

  const conv_direct_layout& l_;
  const float* filters_;
  const std::int64_t* tap_offsets_;
  activation act_;
  float* buffer_;
};

/// out [n, k, out_h, out_w] = act(input [n, c, h, w] (*) weight [k, c, r, s] + bias + residual),
/// one group, split across threads by (image, band of output rows).
inline void conv_direct(const conv_plane_window& g, std::int64_t n, std::int64_t c, std::int64_t k,
                        const float* input, const float* weight, const float* bias, const float* residual,
                        activation act, float* out) {
  // About four bands per thread, so that one image splits evenly; a band's rows do not change any
  // output's bits, so neither does the thread count.
  const std::int64_t threads = get_num_threads();
  const conv_direct_layout l(g, c, k, (n * g.out_h + 4 * threads - 1) / (4 * threads));
  float* const filters = scratch(scratch_slot::conv_filters, static_cast<std::size_t>(l.filter_floats()));
  conv_direct_pack_filters(l, weight, bias, filters);
  // The offsets depend on the window and the channel count only (not on the band height).
  const std::int64_t* const tap_offsets = conv_tap_offsets(
      g, c, g.r, g.s, [&l](std::int64_t ci, std::int64_t ry, std::int64_t sx) { return l.tap_offset(ci, ry, sx); });

  const std::int64_t bands = (g.out_h + l.band_rows - 1) / l.band_rows;
  const std::int64_t in_plane = c * g.h * g.w, out_plane = k * g.out_h * g.out_w;
  const std::int64_t band_flops = 2 * k * l.band_rows * g.out_w * l.taps;
  parallel_for(0, n * bands, grain_in_items(grains().gemm_flops, band_flops), [&](std::int64_t lo, std::int64_t hi) {
    conv_direct_kernel kernel(l, filters, tap_offsets, act);
    for (std::int64_t item = lo; item < hi; ++item) {
      const std::int64_t b = item / bands, y0 = item % bands * l.band_rows;
      kernel({input + b * in_plane, out + b * out_plane, residual != nullptr ? residual + b * out_plane : nullptr}, y0,
             std::min(g.out_h, y0 + l.band_rows));
    }
  });
}

}  // namespace tracemod::kernels::detail
