// Winograd F(m x m, 3x3) convolution (Lavin & Gray, 2016) for 3x3, stride-1, undilated, ungrouped
// convolutions, m = 4 or 2. The output is cut into m x m tiles; each tile is A^T [(G g G^T) . (B^T d B)] A
// for its (m + 2) x (m + 2) input patch d and each filter g, which needs (m + 2)^2 multiplications per
// tile, channel and filter instead of 9 m^2: 36 instead of 144 for F(4x4), 16 instead of 36 for
// F(2x2). Summed over input channels, the (m + 2)^2 elementwise products ("positions") become as many
// independent GEMMs (tiles x C transformed patches times C x K transformed filters), run on the
// packed GEMM's register tiles. F(4x4) does fewer multiplications; F(2x2) has 2.25x less transformed
// filters to read and four times the tiles (GEMM rows) to reuse them on, which is what a 7x7 plane at
// batch 1 needs (conv2d.hpp's winograd_tile_size, docs/kernels.md).
//
// Layouts (P = (m + 2)^2 positions, t = tile index over the batch; CP = C padded to whole vectors,
// KP = K padded to whole NR-wide panels):
//   transformed weights  U[pos][K/NR][c][NR]  P x (KP x C + 16)  (each U[pos]^T packed as a GEMM's op(B),
//                                             positions winograd_filters_stride apart)
//   transformed input    V[pos][t][c]         P x (T x CP + 16 or 32)  (each V[pos] a GEMM's op(A), read in
//                                             place)
//   products             Y[pos][t][k]         P x (T x KP + 16 or 32)
// (positions of V and Y winograd_position_stride apart)
// The products are computed with tiles as rows: with few tiles (16 at 256@14x14, batch 1) the
// register tiles still run full-width over output channels. Every transform runs on vectors of W
// consecutive channels: the m + 2 input rows of a tile row are copied channels last into a buffer in
// L1 (W x W blocks transposed in registers), so a patch element of W channels is one vector load,
// and V is stored whole vectors.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/activation.hpp>
#include <tracemod/kernels/detail/cache_sizes.hpp>
#include <tracemod/kernels/detail/elementwise_loop.hpp>
#include <tracemod/kernels/detail/gemm_driver.hpp>
#include <tracemod/kernels/detail/gemm_pack.hpp>
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

/// Tiles up to which winograd_multiply streams the filters panel by panel (two row panels of
/// the register tile).
inline constexpr std::int64_t winograd_streamed_max_tiles = 2 * gemm_mr;

/// Y[pos] = V[pos] U[pos]^T (tiles x width) for the in_tile^2 positions, for `width` (whole NR-wide panels)
/// output channels whose transformed filters `u` holds (winograd_transform_filters' layout,
/// positions `stride` apart). Tiles are the GEMM's rows and output channels its columns, so the
/// register tiles are full-width whenever the channels are a multiple of NR, however few the tiles
/// (16 at 256@14x14, batch 1); V's rows are read in place and the filters, the large operand, as
/// packed (gemm_packed_b). Each position is one task (serially, nested): bit-identical at any thread
/// count, and a column's values do not depend on which other columns the GEMM computes.
///
/// With few tiles (at most winograd_streamed_max_tiles) and c within one k block of the GEMM, each
/// filter element is used by few rows, so the products are bound by reading U (from L3 or memory:
/// it is too large for L2 whenever this matters): a position then runs the driver's streamed panels
/// (gemm_streamed_panels: panel by panel of U, every row panel of V against the panel while it is
/// in L1), prefetching the next position's first panel after its last. The sums are gemm_blocked's
/// (one k block, the same micro-kernel and store), so the bits do not depend on the path. Otherwise
/// one gemm_blocked per position.
template <std::int64_t M>
inline void winograd_multiply(std::int64_t c, std::int64_t tiles, std::int64_t width, const float* u,
                              std::int64_t stride, const float* v, float* y) {
  const std::int64_t cp = winograd_channels_vectors(c), v_stride = winograd_position_stride(tiles, cp);
  const std::int64_t y_stride = winograd_position_stride(tiles, width);
  if (tiles > winograd_streamed_max_tiles || c > gemm_blocking().kc) {
    parallel_for(0, winograd_positions<M>, 1, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t pos = lo; pos < hi; ++pos)
        gemm_blocked(tiles, width, c, 1.0f, strided_matrix{v + pos * v_stride, cp, 1},
                     gemm_packed_b{u + pos * stride}, 0.0f, nullptr, strided_output{y + pos * y_stride, width, 1});
    });
    return;
  }
  parallel_for(0, winograd_positions<M>, 1, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t pos = lo; pos < hi; ++pos)
      gemm_streamed_panels(tiles, width, c, 1.0f, strided_matrix{v + pos * v_stride, cp, 1},
                           gemm_packed_b{u + pos * stride}, 0.0f, nullptr, strided_output{y + pos * y_stride, width, 1},
                           pos + 1 < hi ? u + (pos + 1) * stride : nullptr);
  });
}

/// out (n x k x out_h x out_w) = act(A^T Y A per tile and output channel + bias + residual), bias
/// and residual (laid out like out) nullable, for tiles [t0, t1) and the output channels of the
/// panels [p0, p1) of NR, from Y[pos][t - t0][ch - p0 NR] (winograd_multiply's rows). Tile by
/// tile (each reads its (m + 2)^2 contiguous rows of Y), W output channels at a time: each vector holds W
/// channels of one output of the tile; the tile's m^2 outputs are then transposed in registers, W at
/// a time, into vectors over the tile's outputs of one channel, stored as rows of m. The activation
/// runs on those vectors, or with a residual on the rows just stored (finish_run): the same float
/// operations as the separate add and activation kernels.
template <std::int64_t M>
inline void winograd_transform_output(const winograd_tiling& tl, std::int64_t k, std::int64_t t0, std::int64_t t1,
                                      const float* y, const float* bias, const float* residual, activation act,
                                      float* out, std::int64_t p0, std::int64_t p1) {
  using F = winograd_transforms<M>;
  constexpr std::int64_t n = F::in_tile, outputs_per_tile = M * M;
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  static_assert(outputs_per_tile % w == 0 || w % outputs_per_tile == 0,
                "a tile's outputs are transposed in whole blocks of W, or one block");
  const std::int64_t tiles = t1 - t0, per_image = tl.tiles_per_image(), tw = tl.tiles_w();
  const std::int64_t first = p0 * gemm_nr, last = std::min(k, p1 * gemm_nr), width = (p1 - p0) * gemm_nr;
  const std::int64_t stride = winograd_position_stride(tiles, width);
  const std::int64_t plane = tl.out_h * tl.out_w;
  const std::int64_t grain = grain_in_items(grains().elementwise, outputs_per_tile * (last - first));
  parallel_for(t0, t1, grain, [&](std::int64_t lo, std::int64_t hi) {
    alignas(buffer_alignment) std::array<float, simd_width> outputs;
    for (std::int64_t t = lo; t < hi; ++t) {
      const std::int64_t img = t / per_image, ty = t % per_image / tw, tx = t % per_image % tw;
      const std::int64_t rows = std::min(M, tl.out_h - ty * M), cols = std::min(M, tl.out_w - tx * M);
      const std::int64_t corner = img * k * plane + ty * M * tl.out_w + tx * M;
      for (std::int64_t k0 = first; k0 < last; k0 += w) {
        const std::int64_t lanes = std::min(w, last - k0);
        const fbatch b = bias == nullptr ? fbatch(0.0f)
                         : lanes == w    ? fbatch::load_unaligned(bias + k0)
                                         : array_operand{bias}.load_partial(k0, lanes);
        std::array<std::array<fbatch, M>, n> columns;  // A^T m: columns[j][i]
        for (std::int64_t j = 0; j < n; ++j) {
          std::array<fbatch, n> m;
          for (std::int64_t i = 0; i < n; ++i)
            m[i] = fbatch::load_aligned(y + (i * n + j) * stride + (t - t0) * width + k0 - first);
          F::output(m, columns[j]);
        }
        std::array<fbatch, outputs_per_tile> result;  // output (i, j) of the tile for W channels: result[i M + j]
        for (std::int64_t i = 0; i < M; ++i) {
          std::array<fbatch, n> column;
          std::array<fbatch, M> row;
          for (std::int64_t j = 0; j < n; ++j) column[j] = columns[j][i];
          F::output(column, row);
          for (std::int64_t j = 0; j < M; ++j) result[i * M + j] = row[j] + b;
        }
        // Block g holds outputs [g W, (g + 1) W): tile rows [g W / M, (g + 1) W / M); with fewer
        // outputs than W, one block holds them all (its other rows zero, never stored).
        for (std::int64_t g = 0; g * w < M * rows; ++g) {
          const std::int64_t first_row = g * w / M, block_rows = std::min(w / M, rows - first_row);
          std::array<fbatch, simd_width> block;
          block.fill(fbatch(0.0f));
          std::copy_n(result.begin() + g * w, std::min(w, outputs_per_tile - g * w), block.begin());
          transpose_square(block);
          for (std::int64_t l = 0; l < lanes; ++l) {
            float* const dst = out + corner + (k0 + l) * plane + first_row * tl.out_w;
            // Without a residual the activation runs on the vector; with one, on each stored row
            // (finish_run, which adds the residual first).
            (residual == nullptr ? activate(act, block[l]) : block[l]).store_aligned(outputs.data());
            for (std::int64_t r = 0; r < block_rows; ++r) {
              if (cols == M)
                std::memcpy(dst + r * tl.out_w, outputs.data() + r * M, M * sizeof(float));  // one 16- or 8-byte move
              else
                std::copy_n(outputs.data() + r * M, cols, dst + r * tl.out_w);
            }
            if (residual != nullptr)
              for (std::int64_t r = 0; r < block_rows; ++r)
                finish_run(dst + r * tl.out_w, cols, 1, residual + (dst - out) + r * tl.out_w, act);
          }
        }
      }
    }
  });
}

/// Whether the transformed filters of k x c filters fit in half of L2: what decides between the tile
/// blocks (winograd_tile_blocks) and one block or panel groups (winograd_by_panel_groups).
template <std::int64_t M>
inline bool winograd_filters_fit_half_l2(std::int64_t k, std::int64_t c) {
  return winograd_filters_bytes<M>(k, c) <= cache_sizes().l2 / 2;
}

/// Blocks of tiles of conv_winograd: its blocks' V and Y together take half of L2 when the
/// transformed filters U fit in the other half, so each block's three stages run in L2 and U is
/// read from L2 by every block; with a larger U, re-reading it per block would cost more than V and
/// Y passing through L3 once, so all tiles are one block. The count is rounded up to a multiple of
/// `workers`, so that threads splitting the blocks get as many each (but there is at most one block
/// per MR-row panel). The blocks do not change any bit: a GEMM row's values do not depend on the
/// other rows.
template <std::int64_t M>
inline std::int64_t winograd_tile_blocks(std::int64_t tiles, std::int64_t c, std::int64_t k, int workers) {
  constexpr auto bytes = static_cast<std::int64_t>(sizeof(float));
  const std::int64_t per_tile = winograd_positions<M> * (winograd_channels_vectors(c) + winograd_channels_padded(k)) * bytes;
  const std::int64_t half_l2 = cache_sizes().l2 / 2;
  if (!winograd_filters_fit_half_l2<M>(k, c)) return 1;
  const std::int64_t blocks = (tiles * per_tile + half_l2 - 1) / half_l2;
  return std::min((blocks + workers - 1) / workers * workers, (tiles + gemm_mr - 1) / gemm_mr);
}

/// Whether conv_winograd runs by groups of output-channel panels: when the transformed filters do not
/// fit in half of L2 but the whole transformed input does, or the tiles are few enough for the
/// products to stream the filters panel by panel (winograd_streamed_max_tiles), which then read V
/// from L1 and L2 a few rows at a time whatever its size. Run as one block instead, the threads split
/// each stage, and each reads half of V and of the products from the other core: at 2 threads,
/// 256@14 (16 tiles, 590 KB of V, 1 MiB L2) took 0.89 ms per call against 0.44 by panel groups.
/// Also when `per_call_split`, the filters are transformed on this call and their panels split
/// between threads, if the filters exceed all of L2 while V fits in it: one block per thread would
/// read a U that half came from the other core's writes, and one block split by stages half of U,
/// V and the products (128@28 per call: 0.49 ms at 2 threads against 0.48 at 1, and 0.30 by panel
/// groups, where each thread transforms its own filters and its own V). One thread keeps its block.
template <std::int64_t M>
inline bool winograd_by_panel_groups(std::int64_t tiles, std::int64_t c, std::int64_t k, bool per_call_split) {
  const std::int64_t input_bytes =
      winograd_positions_floats<M>(tiles, winograd_channels_vectors(c)) * static_cast<std::int64_t>(sizeof(float));
  const std::int64_t l2 = cache_sizes().l2;
  if (winograd_filters_fit_half_l2<M>(k, c)) return false;
  return input_bytes <= l2 / 2 || tiles <= winograd_streamed_max_tiles ||
         (per_call_split && winograd_filters_bytes<M>(k, c) > l2 && input_bytes <= l2);
}

/// Panels of NR output channels that conv_winograd's panel groups take at a time: as many as keep
/// their transformed filters within half of L2 (at least one), so a group's filters, transformed on
/// the call, are written to and read from L2.
template <std::int64_t M>
inline std::int64_t winograd_group_panels(std::int64_t c) {
  const std::int64_t panel_bytes = winograd_positions<M> * c * gemm_nr * static_cast<std::int64_t>(sizeof(float));
  return std::max<std::int64_t>(1, cache_sizes().l2 / 2 / panel_bytes);
}

/// The transformed filters conv_winograd reads: `kept`, already transformed by
/// winograd_transform_filters, or, when `weight` (k x c x 3 x 3) is set, transformed from it on this
/// call.
struct winograd_filter_source {
  const float* kept = nullptr;
  const float* weight = nullptr;
};

/// out = act(input (*) weight + bias + residual) by Winograd F(M x M, 3x3) (tl.m == M), in one of three
/// ways:
/// - by blocks of tiles (winograd_tile_blocks), when the transformed filters U fit in half of L2:
///   filters transformed on this call are transformed whole first; then per block (whole MR-row
///   panels, as many in each block as can be) its input transform, its in_tile^2 products and its output
///   transform. The threads split the blocks, each running whole blocks, and each transforms
///   per-call filters into its own U first (its products then read no filters from the other
///   core); with a single block, they split each stage.
/// - by groups of output-channel panels (winograd_group_panels), when U is larger but the transformed
///   input V of all tiles fits in half of L2, or in L2 when a U past L2 is transformed on the call by
///   several threads (winograd_by_panel_groups): the whole input is
///   transformed once into V, then per group its filters (when they are transformed on this call),
///   its in_tile^2 products and its output transform, so each group's filters are written to and read
///   from L2. The threads split the panels, in one region: each transforms the whole input into its
///   own V (repeated on every thread), and every later stage reads only what its own thread wrote
///   (the input and kept filters aside). Split by stages instead, half of the
///   products and filters a thread reads would come from the other core.
/// - by one block of tiles per thread, when U is larger than half of L2 (and V too, or the tiles
///   too many for panel groups) and either kept or within L2: each thread runs its input transform,
///   products (reading the kept U, or its own U transformed on the call) and output transform, so
///   V and the products stay with the core that wrote them. Split by stages instead, 64@56 and
///   128@28 (1 MiB L2) ran no faster at two threads than at one (docs/kernels.md, "Winograd").
/// - otherwise as one block of all tiles, each stage split between the threads.
/// The splits do not change any bit: a GEMM row's or column's values do not depend on the others.
template <std::int64_t M>
inline void conv_winograd_tiles(const winograd_tiling& tl, std::int64_t c, std::int64_t k, const float* input,
                                const winograd_filter_source& filters, const float* bias, float* out,
                                const float* residual, activation act) {
  const std::int64_t tiles = tl.tiles(), cp = winograd_channels_vectors(c);
  const std::int64_t kp = winograd_channels_padded(k), channel_panels = kp / gemm_nr;
  const bool per_call_split = filters.weight != nullptr && parallel_chunk_count(0, channel_panels, 1) > 1;
  if (winograd_by_panel_groups<M>(tiles, c, k, per_call_split)) {
    const std::int64_t kept_stride = winograd_filters_stride(k, c);
    const auto run_panels = [&](std::int64_t p0, std::int64_t p1) {
      // Kept filters stream from memory however they are grouped: one group.
      const std::int64_t group = filters.weight != nullptr ? winograd_group_panels<M>(c) : p1 - p0;
      const std::int64_t width = std::min(group, p1 - p0) * gemm_nr;
      float* const v = winograd_positions_scratch<M>(scratch_slot::winograd_input, tiles, cp);
      float* const y = winograd_positions_scratch<M>(scratch_slot::winograd_products, tiles, width);
      float* const u = filters.weight == nullptr
                           ? nullptr
                           : scratch(scratch_slot::winograd_filters,
                                     static_cast<std::size_t>(winograd_filters_size<M>(width, c)));
      winograd_transform_input<M>(tl, c, input, 0, tiles, v);
      for (std::int64_t q0 = p0; q0 < p1; q0 += group) {
        const std::int64_t q1 = std::min(p1, q0 + group), n = (q1 - q0) * gemm_nr;
        if (u != nullptr) {
          winograd_transform_filters<M>(k, c, filters.weight, q0, q1, u);
          winograd_multiply<M>(c, tiles, n, u, winograd_filters_stride(n, c), v, y);
        } else {
          winograd_multiply<M>(c, tiles, n, filters.kept + q0 * c * gemm_nr, kept_stride, v, y);
        }
        winograd_transform_output<M>(tl, k, 0, tiles, y, bias, residual, act, out, q0, q1);
      }
    };
    // On one chunk (one thread, or one panel) run_panels runs on this thread outside any region,
    // and each stage splits its own work.
    parallel_for(0, channel_panels, 1, run_panels);
    return;
  }
  const std::int64_t panels = (tiles + gemm_mr - 1) / gemm_mr;
  const bool filters_fit = winograd_filters_fit_half_l2<M>(k, c);
  // With U past half of L2, kept or within L2, one block per thread: each reads the shared U once and
  // keeps its own V and products, where stages split between the threads read half of both from the
  // other core. A larger U transformed on the call (with V past L2, or on one thread) stays one block
  // with the stages split: read whole by every thread, half of it would come from the other core's writes.
  const bool block_per_thread =
      !filters_fit && (filters.weight == nullptr || winograd_filters_bytes<M>(k, c) <= cache_sizes().l2);
  std::int64_t blocks = block_per_thread ? parallel_chunk_count(0, panels, 1) : winograd_tile_blocks<M>(tiles, c, k, 1);
  const int workers = parallel_chunk_count(0, blocks, 1);
  if (workers > 1 && filters_fit) blocks = winograd_tile_blocks<M>(tiles, c, k, workers);
  const auto transformed_filters = [&] {
    float* const buffer =
        scratch(scratch_slot::winograd_filters, static_cast<std::size_t>(winograd_filters_size<M>(k, c)));
    winograd_transform_filters<M>(k, c, filters.weight, buffer);
    return static_cast<const float*>(buffer);
  };
  // With several threads (U within half of L2, or one block per thread and U within L2), each
  // transforms per-call filters into its own U in the blocks' region, so its products read no filters
  // from the other core: 64@56 per call at 2 threads, 1.63x over one thread against 1.43x with a
  // shared U that each thread transformed half of, for 21 us more per thread. On one thread U is
  // transformed once, before the blocks.
  const bool own_filters = filters.weight != nullptr && workers > 1;
  const float* shared_u = filters.kept;
  if (filters.weight != nullptr && !own_filters) shared_u = transformed_filters();
  const auto first_tile = [&](std::int64_t b) { return std::min(tiles, panels * b / blocks * gemm_mr); };
  const auto run_blocks = [&](std::int64_t lo, std::int64_t hi) {
    const float* const u = own_filters ? transformed_filters() : shared_u;
    const std::int64_t rows = std::min(tiles, (panels + blocks - 1) / blocks * gemm_mr);
    float* const v = winograd_positions_scratch<M>(scratch_slot::winograd_input, rows, cp);
    float* const y = winograd_positions_scratch<M>(scratch_slot::winograd_products, rows, kp);
    for (std::int64_t b = lo; b < hi; ++b) {
      const std::int64_t t0 = first_tile(b), t1 = first_tile(b + 1);
      winograd_transform_input<M>(tl, c, input, t0, t1, v);
      winograd_multiply<M>(c, t1 - t0, kp, u, winograd_filters_stride(k, c), v, y);
      winograd_transform_output<M>(tl, k, t0, t1, y, bias, residual, act, out, 0, channel_panels);
    }
  };
  if (workers > 1)
    parallel_for(0, blocks, 1, [&](std::int64_t lo, std::int64_t hi) { run_blocks(lo, hi); });
  else
    run_blocks(0, blocks);
}

/// conv_winograd_tiles for the tiling's tile size: F(4x4, 3x3) or F(2x2, 3x3). Kept filters must have
/// been transformed for the same size (winograd_transform_filters<tl.m>).
inline void conv_winograd(const winograd_tiling& tl, std::int64_t c, std::int64_t k, const float* input,
                          const winograd_filter_source& filters, const float* bias, float* out,
                          const float* residual = nullptr, activation act = activation::none) {
  check_winograd_tile(tl.m, "conv_winograd");
  if (tl.m == 2)
    conv_winograd_tiles<2>(tl, c, k, input, filters, bias, out, residual, act);
  else
    conv_winograd_tiles<4>(tl, c, k, input, filters, bias, out, residual, act);
}

/// All of the filters' panels for F(m x m, 3 x 3), m = 2 or 4 (winograd_transform_filters<M>).
inline void winograd_transform_filters(std::int64_t m, std::int64_t k, std::int64_t c, const float* weight, float* u) {
  check_winograd_tile(m, "winograd_transform_filters");
  if (m == 2)
    winograd_transform_filters<2>(k, c, weight, u);
  else
    winograd_transform_filters<4>(k, c, weight, u);
}

}  // namespace tracemod::kernels::detail
