// Winograd F(4x4, 3x3) convolution (Lavin & Gray, 2016) for 3x3, stride-1, undilated, ungrouped
// convolutions. The output is cut into 4x4 tiles; each tile is A^T [(G g G^T) . (B^T d B)] A for its
// 6x6 input patch d and each filter g, which needs 36 multiplications per tile, channel and filter
// instead of 16 * 9 = 144. Summed over input channels, the 36 elementwise products become 36
// independent GEMMs (tiles x C transformed patches times C x K transformed filters), run on the
// packed GEMM's register tiles.
//
// Layouts (t = tile index over the batch; V's rows padded to whole vectors of tiles, KP = K padded to
// whole NR-wide panels):
//   transformed weights U[pos][K/NR][c][NR]  36 x KP x C  (each U[pos]^T packed as a GEMM's op(B))
//   transformed input   V[pos][c][t]         36 x C x T
//   products            Y[pos][t][k]         36 x T x KP
// The products are computed transposed, tiles as rows: with few tiles (16 at 256@14x14, batch 1) the
// register tiles still run full-width over output channels. The input transform runs on vectors of
// W consecutive tiles, the filter and output transforms on vectors of W consecutive output channels.
// Patches are copied into a [36][W] buffer with scalar moves (a tile's columns are 4 apart: no
// unit-stride vector runs across tiles), the same for filters (9 apart), then transformed with
// whole-vector arithmetic.
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/activation.hpp>
#include <tracemod/kernels/detail/gemm_driver.hpp>
#include <tracemod/kernels/detail/gemm_pack.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <cstdint>

namespace tracemod::kernels::detail {

inline constexpr std::int64_t winograd_out_tile = 4;   ///< m of F(m, 3)
inline constexpr std::int64_t winograd_in_tile = 6;    ///< m + 3 - 1
inline constexpr std::int64_t winograd_positions = 36; ///< in_tile^2 elementwise products per tile

/// The tiling of a convolution over n images of c x h x w with padding (pad_h, pad_w).
struct winograd_tiling {
  std::int64_t n, h, w, pad_h, pad_w, out_h, out_w;

  [[nodiscard]] std::int64_t tiles_h() const { return (out_h + winograd_out_tile - 1) / winograd_out_tile; }
  [[nodiscard]] std::int64_t tiles_w() const { return (out_w + winograd_out_tile - 1) / winograd_out_tile; }
  [[nodiscard]] std::int64_t tiles_per_image() const { return tiles_h() * tiles_w(); }
  [[nodiscard]] std::int64_t tiles() const { return n * tiles_per_image(); }
  /// Tile count rounded up to whole vectors: the row length of V and Y.
  [[nodiscard]] std::int64_t tiles_padded() const {
    constexpr auto w = static_cast<std::int64_t>(simd_width);
    return (tiles() + w - 1) / w * w;
  }
};

/// The six outputs of B^T applied to six values (one column or row of a patch).
template <class T>
inline void winograd_input_1d(const T& d0, const T& d1, const T& d2, const T& d3, const T& d4, const T& d5,
                              std::array<T, 6>& t) {
  const T two(2.0f), four(4.0f), five(5.0f);
  const T a = d4 - four * d2, b = d3 - four * d1;  // t1 = a + b, t2 = a - b
  const T c = d4 - d2, e = two * (d3 - d1);        // t3 = c + e, t4 = c - e
  t[0] = four * d0 - five * d2 + d4;
  t[1] = a + b;
  t[2] = a - b;
  t[3] = c + e;
  t[4] = c - e;
  t[5] = four * d1 - five * d3 + d5;
}

/// The four outputs of A^T applied to six products.
template <class T>
inline void winograd_output_1d(const T& m0, const T& m1, const T& m2, const T& m3, const T& m4, const T& m5,
                               std::array<T, 4>& o) {
  const T two(2.0f), four(4.0f), eight(8.0f);
  const T s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
  o[0] = m0 + s12 + s34;
  o[1] = d12 + two * d34;
  o[2] = s12 + four * s34;
  o[3] = d12 + eight * d34 + m5;
}

/// The six outputs of G applied to three filter taps.
template <class T>
inline void winograd_filter_1d(const T& g0, const T& g1, const T& g2, std::array<T, 6>& u) {
  const T quarter(1.0f / 4.0f), sixth(1.0f / 6.0f), twelfth(1.0f / 12.0f), twentyfourth(1.0f / 24.0f);
  const T outer = g0 + g2;
  u[0] = quarter * g0;
  u[1] = -sixth * (outer + g1);
  u[2] = -sixth * (outer - g1);
  u[3] = twentyfourth * g0 + twelfth * g1 + sixth * g2;
  u[4] = twentyfourth * g0 - twelfth * g1 + sixth * g2;
  u[5] = g2;
}

/// Output channels padded to whole NR-wide panels: the column count of the products' GEMMs.
inline std::int64_t winograd_channels_padded(std::int64_t k) { return (k + gemm_nr - 1) / gemm_nr * gemm_nr; }

/// Floats of the transformed filters of k x c filters (winograd_transform_filters' layout).
inline std::int64_t winograd_filters_size(std::int64_t k, std::int64_t c) {
  return winograd_positions * winograd_channels_padded(k) * c;
}

/// U[pos] = (G g G^T)[pos] for the k x c filters of `weight` (k x c x 3 x 3), laid out as the products
/// read them, op(B) of a GEMM already packed: per position, the c x k matrix U[pos]^T as
/// ceil(k / NR) panels of c x NR floats (channels past k are zero). Each vector holds W consecutive
/// output channels of one input channel, so every store is a whole vector of a panel row.
inline void winograd_transform_filters(std::int64_t k, std::int64_t c, const float* weight, float* u) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  const std::int64_t kp = winograd_channels_padded(k), panels = kp / gemm_nr;
  // Items (panel of output channels, input channel), input channel minor: consecutive items read the
  // panel's filters' neighbouring taps, from the same cache lines, and each item writes whole panel
  // rows.
  parallel_for(0, panels * c, 64, [&](std::int64_t lo, std::int64_t hi) {
    alignas(buffer_alignment) std::array<float, 9 * simd_width> taps;
    for (std::int64_t item = lo; item < hi; ++item) {
      const std::int64_t panel = item / c, ch = item % c;
      for (std::int64_t k0 = panel * gemm_nr; k0 < (panel + 1) * gemm_nr; k0 += w) {
        for (std::int64_t l = 0; l < w; ++l)
          for (std::int64_t tap = 0; tap < 9; ++tap)
            taps[tap * w + l] = k0 + l < k ? weight[((k0 + l) * c + ch) * 9 + tap] : 0.0f;
        std::array<fbatch, 9> g;
        for (std::int64_t tap = 0; tap < 9; ++tap) g[tap] = fbatch::load_aligned(taps.data() + tap * w);
        std::array<std::array<fbatch, 6>, 3> columns;  // G g: columns[j][i]
        for (std::int64_t j = 0; j < 3; ++j) winograd_filter_1d(g[j], g[3 + j], g[6 + j], columns[j]);
        float* const dst = u + (panel * c + ch) * gemm_nr + k0 % gemm_nr;
        for (std::int64_t i = 0; i < 6; ++i) {
          std::array<fbatch, 6> row;  // row i of (G g) G^T
          winograd_filter_1d(columns[0][i], columns[1][i], columns[2][i], row);
          for (std::int64_t j = 0; j < 6; ++j) row[j].store_unaligned(dst + (i * 6 + j) * kp * c);
        }
      }
    }
  });
}

/// V[pos][ch][t] for channels [0, c) of the input (n x c x h x w), tiles padded with zeros. Each
/// plane is first copied with its zero border (and zeros past the last whole tile), so patches are
/// read without bounds tests.
inline void winograd_transform_input(const winograd_tiling& tl, std::int64_t c, const float* input, float* v) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  const std::int64_t tiles = tl.tiles(), tp = tl.tiles_padded(), per_image = tl.tiles_per_image();
  const std::int64_t tw = tl.tiles_w();
  const std::int64_t ph = tl.tiles_h() * winograd_out_tile + 2, pw = tw * winograd_out_tile + 2;
  parallel_for(0, c, 1, [&](std::int64_t lo, std::int64_t hi) {
    float* const padded = scratch(scratch_slot::conv_input, static_cast<std::size_t>(tl.n * ph * pw));
    alignas(buffer_alignment) std::array<float, winograd_positions * simd_width> patch;
    for (std::int64_t ch = lo; ch < hi; ++ch) {
      std::fill_n(padded, tl.n * ph * pw, 0.0f);
      for (std::int64_t b = 0; b < tl.n; ++b) {
        const float* plane = input + (b * c + ch) * tl.h * tl.w;
        // Input rows and columns past the last tile's patch are never read.
        const std::int64_t rows = std::min(tl.h, ph - tl.pad_h), cols = std::min(tl.w, pw - tl.pad_w);
        for (std::int64_t y = 0; y < rows; ++y)
          std::copy_n(plane + y * tl.w, cols, padded + (b * ph + tl.pad_h + y) * pw + tl.pad_w);
      }
      for (std::int64_t t0 = 0; t0 < tp; t0 += w) {
        for (std::int64_t l = 0; l < w; ++l) {
          const std::int64_t t = std::min(t0 + l, tiles - 1);  // lanes past the last tile repeat it
          const std::int64_t b = t / per_image, ty = t % per_image / tw, tx = t % per_image % tw;
          const float* src = padded + (b * ph + ty * winograd_out_tile) * pw + tx * winograd_out_tile;
          for (std::int64_t i = 0; i < 6; ++i)
            for (std::int64_t j = 0; j < 6; ++j) patch[(i * 6 + j) * w + l] = src[i * pw + j];
        }
        std::array<std::array<fbatch, 6>, 6> columns;  // B^T d: columns[j][i]
        for (std::int64_t j = 0; j < 6; ++j) {
          const auto d = [&](std::int64_t i) { return fbatch::load_aligned(patch.data() + (i * 6 + j) * w); };
          winograd_input_1d(d(0), d(1), d(2), d(3), d(4), d(5), columns[j]);
        }
        for (std::int64_t i = 0; i < 6; ++i) {
          std::array<fbatch, 6> row;
          winograd_input_1d(columns[0][i], columns[1][i], columns[2][i], columns[3][i], columns[4][i], columns[5][i],
                            row);
          for (std::int64_t j = 0; j < 6; ++j) row[j].store_aligned(v + ((i * 6 + j) * c + ch) * tp + t0);
        }
      }
    }
  });
}

/// Y[pos] = V[pos]^T U[pos]^T (tiles x kp) for the 36 positions, with U from
/// winograd_transform_filters. Tiles are the GEMM's rows and output channels its columns, so the
/// register tiles are full-width whenever k is a multiple of NR, however few the tiles (16 at
/// 256@14x14, batch 1), and the filters, the large operand, are read as packed (gemm_packed_b).
/// Each position is one task running a whole gemm_blocked (serially, nested): bit-identical at any
/// thread count.
inline void winograd_multiply(std::int64_t k, std::int64_t c, std::int64_t tiles, std::int64_t tp, const float* u,
                              const float* v, float* y) {
  const std::int64_t kp = winograd_channels_padded(k);
  parallel_for(0, winograd_positions, 1, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t pos = lo; pos < hi; ++pos)
      gemm_blocked(tiles, kp, c, 1.0f, strided_matrix{v + pos * c * tp, 1, tp}, gemm_packed_b{u + pos * kp * c}, 0.0f,
                   nullptr, strided_output{y + pos * tiles * kp, kp, 1});
  });
}

/// out (n x k x out_h x out_w) = act(A^T Y A per tile and output channel + bias + residual), bias and
/// residual (laid out like out) nullable, from Y[pos][t][kp]. Each vector holds W consecutive output
/// channels of one tile. The tiles' scatter is a plain copy; the residual and the activation then run
/// as vectors over each output plane while it is in cache (added per element in the scatter, they
/// cost more than the separate kernels they replace).
inline void winograd_transform_output(const winograd_tiling& tl, std::int64_t k, const float* y, const float* bias,
                                      const float* residual, activation act, float* out) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  const std::int64_t tiles = tl.tiles(), per_image = tl.tiles_per_image(), tw = tl.tiles_w();
  const std::int64_t kp = winograd_channels_padded(k), plane = tl.out_h * tl.out_w;
  parallel_for(0, (k + w - 1) / w, 1, [&](std::int64_t lo, std::int64_t hi) {
    alignas(buffer_alignment) std::array<float, 16 * simd_width> result;
    alignas(buffer_alignment) std::array<float, simd_width> bias_lanes{};
    for (std::int64_t k0 = lo * w; k0 < std::min(k, hi * w); k0 += w) {
      const std::int64_t lanes = std::min(w, k - k0);
      for (std::int64_t l = 0; l < lanes; ++l) bias_lanes[l] = bias != nullptr ? bias[k0 + l] : 0.0f;
      const fbatch b = fbatch::load_aligned(bias_lanes.data());
      for (std::int64_t t = 0; t < tiles; ++t) {
        std::array<std::array<fbatch, 4>, 6> columns;  // A^T m: columns[j][i]
        for (std::int64_t j = 0; j < 6; ++j) {
          const auto m = [&](std::int64_t i) { return fbatch::load_aligned(y + ((i * 6 + j) * tiles + t) * kp + k0); };
          winograd_output_1d(m(0), m(1), m(2), m(3), m(4), m(5), columns[j]);
        }
        for (std::int64_t i = 0; i < 4; ++i) {
          std::array<fbatch, 4> row;
          winograd_output_1d(columns[0][i], columns[1][i], columns[2][i], columns[3][i], columns[4][i], columns[5][i],
                             row);
          for (std::int64_t j = 0; j < 4; ++j) (row[j] + b).store_aligned(result.data() + (i * 4 + j) * w);
        }
        const std::int64_t img = t / per_image, ty = t % per_image / tw, tx = t % per_image % tw;
        const std::int64_t rows = std::min(winograd_out_tile, tl.out_h - ty * winograd_out_tile);
        const std::int64_t cols = std::min(winograd_out_tile, tl.out_w - tx * winograd_out_tile);
        float* const corner = out + (img * k + k0) * plane + ty * winograd_out_tile * tl.out_w + tx * winograd_out_tile;
        for (std::int64_t l = 0; l < lanes; ++l)
          for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < cols; ++j) corner[l * plane + i * tl.out_w + j] = result[(i * 4 + j) * w + l];
      }
      if (residual == nullptr && act == activation::none) continue;
      for (std::int64_t img = 0; img < tl.n; ++img) {
        const std::int64_t offset = (img * k + k0) * plane;
        finish_run(out + offset, lanes * plane, 1, residual != nullptr ? residual + offset : nullptr, act);
      }
    }
  });
}

/// out = act(input (*) weight + bias + residual) from filters already transformed by
/// winograd_transform_filters.
inline void conv_winograd(const winograd_tiling& tl, std::int64_t c, std::int64_t k, const float* input,
                          const float* filters, const float* bias, float* out, const float* residual = nullptr,
                          activation act = activation::none) {
  const std::int64_t tp = tl.tiles_padded();
  float* const v = scratch(scratch_slot::winograd_input, static_cast<std::size_t>(winograd_positions * c * tp));
  float* const y = scratch(scratch_slot::winograd_products,
                           static_cast<std::size_t>(winograd_positions * tl.tiles() * winograd_channels_padded(k)));
  winograd_transform_input(tl, c, input, v);
  winograd_multiply(k, c, tl.tiles(), tp, filters, v, y);
  winograd_transform_output(tl, k, y, bias, residual, act, out);
}

}  // namespace tracemod::kernels::detail
