// The transforms of Winograd F(m x m, 3x3) (conv_winograd.hpp: the algorithm and its layouts): the
// matrices, the tiling of the output, the sizes and strides of the transformed operands, and the
// filter and input transforms into the layouts the position GEMMs read.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/elementwise_loop.hpp>
#include <tracemod/kernels/detail/gemm_micro_kernel.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>
#include <tracemod/kernels/detail/simd_transpose.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

namespace tracemod::kernels::detail {

/// The transforms of F(m x m, 3 x 3) for m = 4 and m = 2 (Lavin & Gray's B^T, G and A^T), each
/// applied to one column or row of a tile: `input` B^T to in_tile values of a patch, `filter` G to
/// three taps, `output` A^T to in_tile products.
template <std::int64_t M>
struct winograd_transforms;

template <>
struct winograd_transforms<4> {
  static constexpr std::int64_t in_tile = 6;

  template <class T>
  static void input(const std::array<T, 6>& d, std::array<T, 6>& t) {
    const T two(2.0f), four(4.0f), five(5.0f);
    const T a = d[4] - four * d[2], b = d[3] - four * d[1];  // t1 = a + b, t2 = a - b
    const T c = d[4] - d[2], e = two * (d[3] - d[1]);        // t3 = c + e, t4 = c - e
    t[0] = four * d[0] - five * d[2] + d[4];
    t[1] = a + b;
    t[2] = a - b;
    t[3] = c + e;
    t[4] = c - e;
    t[5] = four * d[1] - five * d[3] + d[5];
  }

  template <class T>
  static void output(const std::array<T, 6>& m, std::array<T, 4>& o) {
    const T two(2.0f), four(4.0f), eight(8.0f);
    const T s12 = m[1] + m[2], d12 = m[1] - m[2], s34 = m[3] + m[4], d34 = m[3] - m[4];
    o[0] = m[0] + s12 + s34;
    o[1] = d12 + two * d34;
    o[2] = s12 + four * s34;
    o[3] = d12 + eight * d34 + m[5];
  }

  template <class T>
  static void filter(const std::array<T, 3>& g, std::array<T, 6>& u) {
    const T quarter(1.0f / 4.0f), sixth(1.0f / 6.0f), twelfth(1.0f / 12.0f), twentyfourth(1.0f / 24.0f);
    const T outer = g[0] + g[2];
    u[0] = quarter * g[0];
    u[1] = -sixth * (outer + g[1]);
    u[2] = -sixth * (outer - g[1]);
    u[3] = twentyfourth * g[0] + twelfth * g[1] + sixth * g[2];
    u[4] = twentyfourth * g[0] - twelfth * g[1] + sixth * g[2];
    u[5] = g[2];
  }
};

template <>
struct winograd_transforms<2> {
  static constexpr std::int64_t in_tile = 4;

  template <class T>
  static void input(const std::array<T, 4>& d, std::array<T, 4>& t) {
    t[0] = d[0] - d[2];
    t[1] = d[1] + d[2];
    t[2] = d[2] - d[1];
    t[3] = d[1] - d[3];
  }

  template <class T>
  static void output(const std::array<T, 4>& m, std::array<T, 2>& o) {
    o[0] = m[0] + m[1] + m[2];
    o[1] = m[1] - m[2] - m[3];
  }

  template <class T>
  static void filter(const std::array<T, 3>& g, std::array<T, 4>& u) {
    const T half(0.5f);
    const T outer = g[0] + g[2];
    u[0] = g[0];
    u[1] = half * (outer + g[1]);
    u[2] = half * (outer - g[1]);
    u[3] = g[2];
  }
};

/// in_tile^2: the elementwise products per tile, channel and filter of F(m x m, 3 x 3).
template <std::int64_t M>
inline constexpr std::int64_t winograd_positions = winograd_transforms<M>::in_tile * winograd_transforms<M>::in_tile;

/// The tile sides there are transforms for: value_error naming `op` otherwise.
inline void check_winograd_tile(std::int64_t m, const char* op) {
  if (m != 2 && m != 4)
    throw value_error(std::string(op) + ": Winograd tiles are 2x2 or 4x4 (F(2x2, 3x3), F(4x4, 3x3)), got side " +
                      std::to_string(m));
}

/// The tiling of a convolution over n images of c x h x w with padding (pad_h, pad_w) into m x m
/// output tiles.
struct winograd_tiling {
  std::int64_t n, h, w, pad_h, pad_w, out_h, out_w;
  std::int64_t m = 4;  ///< the output tile's side: F(m x m, 3 x 3)

  [[nodiscard]] std::int64_t tiles_h() const { return (out_h + m - 1) / m; }
  [[nodiscard]] std::int64_t tiles_w() const { return (out_w + m - 1) / m; }
  [[nodiscard]] std::int64_t tiles_per_image() const { return tiles_h() * tiles_w(); }
  [[nodiscard]] std::int64_t tiles() const { return n * tiles_per_image(); }
};

/// Output channels padded to whole NR-wide panels: the column count of the products' GEMMs.
inline std::int64_t winograd_channels_padded(std::int64_t k) { return (k + gemm_nr - 1) / gemm_nr * gemm_nr; }

/// Floats from one position's transformed filters to the next: KP x C and a cache line more. KP x C
/// is a multiple of 4 KiB whenever c is a multiple of 32 (every ResNet layer), so without the
/// line the 36 (or 16) rows a filter's transform stores would all map to one L1 set.
inline std::int64_t winograd_filters_stride(std::int64_t k, std::int64_t c) {
  return winograd_channels_padded(k) * c + 64 / static_cast<std::int64_t>(sizeof(float));
}

/// Floats of the transformed filters of k x c filters for F(M x M, 3 x 3)
/// (winograd_transform_filters' layout).
template <std::int64_t M>
inline std::int64_t winograd_filters_size(std::int64_t k, std::int64_t c) {
  return winograd_positions<M> * winograd_filters_stride(k, c);
}

/// winograd_filters_size<m> for a tile side m (2 or 4) known at run time.
inline std::int64_t winograd_filters_size(std::int64_t m, std::int64_t k, std::int64_t c) {
  check_winograd_tile(m, "winograd_filters_size");
  return m == 2 ? winograd_filters_size<2>(k, c) : winograd_filters_size<4>(k, c);
}

/// The bytes of winograd_filters_size<M>(k, c).
template <std::int64_t M>
inline std::int64_t winograd_filters_bytes(std::int64_t k, std::int64_t c) {
  return winograd_filters_size<M>(k, c) * static_cast<std::int64_t>(sizeof(float));
}

/// U[pos] = (G g G^T)[pos] for the k x c filters of `weight` (k x c x 3 x 3), laid out as the products
/// read them, op(B) of a GEMM already packed: per position, the c x k matrix U[pos]^T as
/// ceil(k / NR) panels of c x NR floats (channels past k are zero), positions
/// winograd_filters_stride apart. Each vector holds W consecutive output channels of one input
/// channel, so every store is a whole vector of a panel row. The taps are gathered W input channels
/// at a time: an output channel's 9 W taps for them are 9 vectors, and W x W register transposes
/// turn W output channels' vectors into vectors over the output channels (one per input channel
/// and tap). Only the panels [p0, p1) of NR output channels are transformed, into `u` laid out for
/// them alone: panel p0 first, positions winograd_filters_stride((p1 - p0) NR, c) apart.
template <std::int64_t M>
inline void winograd_transform_filters(std::int64_t k, std::int64_t c, const float* weight, std::int64_t p0,
                                       std::int64_t p1, float* u) {
  using F = winograd_transforms<M>;
  constexpr std::int64_t n = F::in_tile;
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  const std::int64_t stride = winograd_filters_stride((p1 - p0) * gemm_nr, c);
  const std::int64_t blocks = (c + w - 1) / w;
  // Items (panel of output channels, block of W input channels), input channels minor: consecutive
  // items read the panel's filters' neighbouring taps, and each item writes whole panel rows.
  parallel_for(p0 * blocks, p1 * blocks, std::max<std::int64_t>(64 / w, 1), [&](std::int64_t lo, std::int64_t hi) {
    // taps[(9 ch + tap) W + l]: tap `tap` of input channel ch0 + ch for output channel k0 + l.
    alignas(buffer_alignment) std::array<float, 9 * simd_width * simd_width> taps;
    for (std::int64_t item = lo; item < hi; ++item) {
      const std::int64_t panel = item / blocks, ch0 = item % blocks * w, chans = std::min(w, c - ch0);
      for (std::int64_t k0 = panel * gemm_nr; k0 < (panel + 1) * gemm_nr; k0 += w) {
        if (k0 + w <= k && chans == w) {
          for (std::int64_t m = 0; m < 9; ++m) {
            std::array<fbatch, simd_width> block;  // block[l] lane e: float m W + e of filter k0 + l's taps
            for (std::int64_t l = 0; l < w; ++l)
              block[l] = fbatch::load_unaligned(weight + ((k0 + l) * c + ch0) * 9 + m * w);
            transpose_square(block);
            store_rows(block, taps.data() + m * w * w, w);
          }
        } else {
          for (std::int64_t ch = 0; ch < chans; ++ch)
            for (std::int64_t tap = 0; tap < 9; ++tap)
              for (std::int64_t l = 0; l < w; ++l)
                taps[(ch * 9 + tap) * w + l] = k0 + l < k ? weight[((k0 + l) * c + ch0 + ch) * 9 + tap] : 0.0f;
        }
        for (std::int64_t ch = 0; ch < chans; ++ch) {
          std::array<fbatch, 9> g;
          for (std::int64_t tap = 0; tap < 9; ++tap) g[tap] = fbatch::load_aligned(taps.data() + (ch * 9 + tap) * w);
          std::array<std::array<fbatch, n>, 3> columns;  // G g: columns[j][i]
          for (std::int64_t j = 0; j < 3; ++j) F::filter(std::array<fbatch, 3>{g[j], g[3 + j], g[6 + j]}, columns[j]);
          float* const dst = u + ((panel - p0) * c + ch0 + ch) * gemm_nr + k0 % gemm_nr;
          for (std::int64_t i = 0; i < n; ++i) {
            std::array<fbatch, n> row;  // row i of (G g) G^T
            F::filter(std::array<fbatch, 3>{columns[0][i], columns[1][i], columns[2][i]}, row);
            for (std::int64_t j = 0; j < n; ++j) row[j].store_unaligned(dst + (i * n + j) * stride);
          }
        }
      }
    }
  });
}

/// All of the filters' panels (winograd_transform_filters above).
template <std::int64_t M>
inline void winograd_transform_filters(std::int64_t k, std::int64_t c, const float* weight, float* u) {
  winograd_transform_filters<M>(k, c, weight, 0, winograd_channels_padded(k) / gemm_nr, u);
}

/// Channels padded to whole vectors: the row length of V.
inline std::int64_t winograd_channels_vectors(std::int64_t c) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  return (c + w - 1) / w * w;
}

/// Floats from one position's matrix of V or of the products to the next, for `rows` tiles of
/// `row_floats` each: padded to an odd number of cache lines. Unpadded, the 36 vectors that an F(4x4) tile's
/// input transform stores, or its output transform loads, would fall into few L1 sets and evict
/// each other: one position of V at 128@28x28 is 392 lines (all 36 into 8 of the 64 sets), of the
/// products of one panel at 256@14x14 32 lines (2 sets).
inline std::int64_t winograd_position_stride(std::int64_t rows, std::int64_t row_floats) {
  constexpr std::int64_t line = 16;  // floats per 64-byte line
  const std::int64_t lines = (rows * row_floats + line - 1) / line;
  return (lines + 1 + lines % 2) * line;
}

/// Floats of the in_tile^2 positions of V or of the products of F(M x M, 3 x 3): `rows` tiles of
/// `row_floats` each, positions winograd_position_stride apart.
template <std::int64_t M>
inline std::int64_t winograd_positions_floats(std::int64_t rows, std::int64_t row_floats) {
  return winograd_positions<M> * winograd_position_stride(rows, row_floats);
}

/// This thread's scratch for V or the products (`slot`): winograd_positions_floats<M>(rows, row_floats).
template <std::int64_t M>
inline float* winograd_positions_scratch(scratch_slot slot, std::int64_t rows, std::int64_t row_floats) {
  return scratch(slot, static_cast<std::size_t>(winograd_positions_floats<M>(rows, row_floats)));
}

/// Tiles of one tile row that winograd_transform_input reads through one buffer: 48 columns' worth,
/// whose in_tile input rows, copied channels last for W channels, take at most 6 x (48 + 2) x W floats
/// (19 KiB at W = 16 for F(4x4)), in L1.
template <std::int64_t M>
inline constexpr std::int64_t winograd_row_chunk_tiles = 48 / M;
inline constexpr std::int64_t winograd_row_buffer_cols = 48 + 2;

/// `columns` floats of one input row from `src`, for `lanes` (at most W) channels whose rows are
/// `plane` floats apart, stored channels last: column x's W channels at dst[x W, (x + 1) W), channels
/// past `lanes` zero. Blocks of W columns are transposed in registers; the last block of a run of
/// at least W columns ends at the run's end, overlapping the one before. A shorter run loads W
/// floats all the same (the columns past it are never stored) unless that would pass `end`, the
/// input's end.
inline void winograd_row_channels_last(const float* src, std::int64_t plane, std::int64_t lanes, std::int64_t columns,
                                       const float* end, float* dst) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  for (std::int64_t x = 0; x < columns; x += w) {
    const std::int64_t x1 = columns - x >= w || columns < w ? x : columns - w;
    const std::int64_t count = std::min(w, columns - x1);
    const bool whole = end - (src + (lanes - 1) * plane + x1) >= w;
    std::array<fbatch, simd_width> block;
    block.fill(fbatch(0.0f));
    for (std::int64_t l = 0; l < lanes; ++l)
      block[l] = whole ? fbatch::load_unaligned(src + l * plane + x1)
                       : array_operand{src + l * plane + x1}.load_partial(0, count);
    transpose_square(block);
    if (count == w)
      store_rows(block, dst + x1 * w, w);
    else
      for (std::int64_t j = 0; j < count; ++j) block[j].store_aligned(dst + (x1 + j) * w);
  }
}

/// B^T d B of one patch of W channels, element (i, j) at patch[(i row_stride + j) W], stored at
/// v[(in_tile i + j) position_stride].
template <std::int64_t M>
inline void winograd_input_patch(const float* patch, std::int64_t row_stride, float* v,
                                 std::int64_t position_stride) {
  using F = winograd_transforms<M>;
  constexpr std::int64_t n = F::in_tile;
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  std::array<std::array<fbatch, n>, n> columns;  // B^T d: columns[j][i]
  for (std::int64_t j = 0; j < n; ++j) {
    std::array<fbatch, n> d;
    for (std::int64_t i = 0; i < n; ++i) d[i] = fbatch::load_aligned(patch + (i * row_stride + j) * w);
    F::input(d, columns[j]);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    std::array<fbatch, n> column, row;
    for (std::int64_t j = 0; j < n; ++j) column[j] = columns[j][i];
    F::input(column, row);
    for (std::int64_t j = 0; j < n; ++j) row[j].store_aligned(v + (i * n + j) * position_stride);
  }
}

/// V[pos][t - t0][ch] (t1 - t0 tiles x cp per position, cp = channels padded to whole vectors) for
/// tiles [t0, t1), straight from the input (n x c x h x w). Work items are a block of W channels
/// of up to winograd_row_chunk_tiles tiles of one tile row: the m + 2 input rows those tiles read are
/// first copied channels last into a buffer on the stack (winograd_row_channels_last; zero outside
/// the image and past c), which stays in L1, so each element of a patch is one vector of W
/// channels; V stores whole vectors, and each V[pos] is a GEMM operand read in place.
template <std::int64_t M>
inline void winograd_transform_input(const winograd_tiling& tl, std::int64_t c, const float* input, std::int64_t t0,
                                     std::int64_t t1, float* v) {
  constexpr std::int64_t in_tile = winograd_transforms<M>::in_tile, chunk_tiles = winograd_row_chunk_tiles<M>;
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  constexpr std::int64_t buffer_cols = winograd_row_buffer_cols;
  const std::int64_t cp = winograd_channels_vectors(c), channel_blocks = cp / w;
  const std::int64_t tiles = t1 - t0, tw = tl.tiles_w(), stride = winograd_position_stride(tiles, cp);
  const float* const end = input + tl.n * c * tl.h * tl.w;
  const std::int64_t chunks = (tw + chunk_tiles - 1) / chunk_tiles;
  const std::int64_t row0 = t0 / tw, rows = (t1 - 1) / tw + 1 - row0;  // tile rows over the batch
  const std::int64_t grain = grain_in_items(grains().elementwise, winograd_positions<M> * w * tw / chunks);
  parallel_for(0, rows * chunks * channel_blocks, grain, [&](std::int64_t lo, std::int64_t hi) {
    alignas(buffer_alignment) std::array<float, in_tile * buffer_cols * simd_width> buffer;
    for (std::int64_t item = lo; item < hi; ++item) {
      const std::int64_t row = row0 + item / (chunks * channel_blocks);
      const std::int64_t chunk = item / channel_blocks % chunks, c0 = item % channel_blocks * w;
      // The chunk's tiles, cut to [t0, t1) (a range may start or end inside a row), and their columns.
      const std::int64_t first = std::max(t0, row * tw + chunk * tw / chunks);
      const std::int64_t last = std::min(t1, row * tw + (chunk + 1) * tw / chunks);
      if (first >= last) continue;
      const std::int64_t b = row / tl.tiles_h(), ty = row % tl.tiles_h();
      const std::int64_t x_first = (first - row * tw) * M - tl.pad_w;  // buffer column 0
      const std::int64_t width = (last - first) * M + 2;
      // Buffer columns [left, right) are inside the image.
      const std::int64_t left = std::clamp<std::int64_t>(-x_first, 0, width);
      const std::int64_t right = std::clamp<std::int64_t>(tl.w - x_first, left, width);
      for (std::int64_t r = 0; r < in_tile; ++r) {
        float* const dst = buffer.data() + r * buffer_cols * w;
        const std::int64_t iy = ty * M - tl.pad_h + r;
        if (iy < 0 || iy >= tl.h || left == right) {
          std::fill_n(dst, width * w, 0.0f);
          continue;
        }
        std::fill_n(dst, left * w, 0.0f);
        std::fill_n(dst + right * w, (width - right) * w, 0.0f);
        const float* const src = input + ((b * c + c0) * tl.h + iy) * tl.w + x_first + left;  // channel c0
        winograd_row_channels_last(src, tl.h * tl.w, std::min(w, c - c0), right - left, end, dst + left * w);
      }
      for (std::int64_t t = first; t < last; ++t)
        winograd_input_patch<M>(buffer.data() + (t - first) * M * w, buffer_cols, v + (t - t0) * cp + c0, stride);
    }
  });
}

}  // namespace tracemod::kernels::detail
