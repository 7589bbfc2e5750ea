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
#include <tracemod/kernels/detail/conv_winograd_transform.hpp>
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
