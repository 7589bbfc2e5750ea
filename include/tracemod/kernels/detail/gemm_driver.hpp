// Cache blocking around the micro-kernel (Goto/BLIS loop order, with the broadcast and vector
// roles of BLIS's x86 kernels): a kc x nc block of op(B) is packed once and stays in L2 while every
// row panel of op(A) (kc x MR, L1-resident) sweeps across its NR-wide panels. kc and nc follow from
// the cache sizes found at run time (gemm_blocking_for).
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/cache_sizes.hpp>
#include <tracemod/kernels/detail/gemm_gemv.hpp>
#include <tracemod/kernels/detail/gemm_micro_kernel.hpp>
#include <tracemod/kernels/detail/gemm_pack.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstdint>
#include <type_traits>

namespace tracemod::kernels::detail {

/// Upper bounds of the blocks (sizes of stack tables); the blocks themselves come from gemm_blocking().
inline constexpr std::int64_t gemm_kc = 1024;
inline constexpr std::int64_t gemm_nc = 1024;
/// At most this many columns past a block's last whole vector are computed as dot products.
inline constexpr std::int64_t gemm_dot_columns = simd_width / 4;

struct gemm_blocking_t {
  std::int64_t kc, nc;  ///< largest k and n extents of a packed block of op(B)
};

/// The blocking rule. The A panel (kc x MR floats) is reused by every tile of its row panel while
/// B's kc x NR micro-panels stream past it: it gets half of L1. The packed B block (kc x nc floats)
/// is reused by every row panel: it gets half of L2, the other half holding the A panels and C
/// lines passing through. kc is a multiple of 16 (whole cache lines), nc of NR.
[[nodiscard]] inline gemm_blocking_t gemm_blocking_for(const cache_sizes_t& caches) noexcept {
  constexpr auto bytes = static_cast<std::int64_t>(sizeof(float));
  const std::int64_t kc = std::clamp<std::int64_t>(caches.l1d / 2 / (gemm_mr * bytes) / 16 * 16, 64, gemm_kc);
  const std::int64_t nc = std::clamp<std::int64_t>(caches.l2 / 2 / (kc * bytes) / gemm_nr * gemm_nr, 4 * gemm_nr, gemm_nc);
  return {kc, nc};
}

/// The blocking for this machine, from its cache sizes, decided once.
[[nodiscard]] inline const gemm_blocking_t& gemm_blocking() {
  static const gemm_blocking_t b = gemm_blocking_for(cache_sizes());
  return b;
}

/// Splits `extent` into equal blocks of at most `max_block`, rounded up to a multiple of `multiple`,
/// so no block is a thin remainder.
inline std::int64_t balanced_block(std::int64_t extent, std::int64_t max_block, std::int64_t multiple) {
  const std::int64_t blocks = (extent + max_block - 1) / max_block;
  const std::int64_t block = (extent + blocks - 1) / blocks;
  return (block + multiple - 1) / multiple * multiple;
}

/// One block of nc columns of C (j0 a multiple of the block width): its NR-wide panels of op(B), of
/// which the first `tiles` are computed as register tiles; a few columns past the last whole vector
/// (49 = 3 * 16 + 1 output positions of a 7x7 conv) would each cost a vector per row and k, so when
/// op(A)'s rows are read in place they are computed as dot products with those rows instead, read
/// right after the tiles used them.
struct gemm_column_block {
  std::int64_t j0, nc;
  std::int64_t dot_columns;  ///< trailing columns computed as dot products (0 to gemm_dot_columns)
  std::int64_t tiled;        ///< nc - dot_columns
  std::int64_t tiles;        ///< ceil(tiled / NR)
  std::int64_t panels;       ///< ceil(nc / NR): the tiles' panels and the one holding the dot columns
  std::int64_t items_per_row;  ///< work items of a row panel: its tiles, then (if any) its dot columns

  gemm_column_block(std::int64_t j0_, std::int64_t nc_, bool a_in_place)
      : j0(j0_), nc(nc_),
        dot_columns(a_in_place && nc_ % static_cast<std::int64_t>(simd_width) <= gemm_dot_columns
                        ? nc_ % static_cast<std::int64_t>(simd_width)
                        : 0),
        tiled(nc_ - dot_columns), tiles((tiled + gemm_nr - 1) / gemm_nr), panels((nc_ + gemm_nr - 1) / gemm_nr),
        items_per_row(tiles + (dot_columns > 0 ? 1 : 0)) {}
};

/// op(B) (k x n) packed once for every later product, instead of by each call: gemm_pack_b(b, 0, k,
/// 0, n, data), i.e. ceil(n / NR) panels of k x NR floats, panel p at data + p * NR * k, columns
/// past n zero. Rows [k0, k0 + kc) of a panel are contiguous in it, so every k block of the driver
/// reads its panels in place, whatever the blocking of the machine: the packed data does not depend
/// on it. gemm_packed_b_size(k, n) floats, 64-byte aligned.
struct gemm_packed_b {
  const float* data;
};

inline std::int64_t gemm_packed_b_size(std::int64_t k, std::int64_t n) {
  return (n + gemm_nr - 1) / gemm_nr * gemm_nr * k;
}

/// A block of op(B) as packed for rows [k0, k0 + kc): `b` holds the block's NR-wide panels,
/// `panel_stride` floats apart (NR * kc when packed per block, NR * k when packed once), `columns`
/// its dot columns' contiguous copies.
struct gemm_packed_block {
  const gemm_column_block& blk;
  std::int64_t k0, kc;
  const float* b;
  std::int64_t panel_stride;
  const float* columns;
};

/// The column split is taken when every thread gets at least this many NR-wide column panels and
/// at most gemm_column_split_imbalance_tenths / 10 of its equal share of the columns. Shares end at
/// the panel boundaries nearest to equal splits of the columns, so a narrow last panel counts for
/// its width: a 14x14 plane's 196 columns (six panels of 32 and one of 4) split 96 : 100 between two
/// threads, while a 7x7 plane's 49 (one panel of 32 and one of 17) would split 32 : 17 and take the
/// tile split instead.
inline constexpr std::int64_t gemm_column_split_min_panels = 3;
inline constexpr std::int64_t gemm_column_split_imbalance_tenths = 11;

/// Rows of C per thread from which the row split (gemm_blocked) is taken over the tile split: every
/// thread then packs all of op(B), which costs (a packed float ~ 32 flops) at most 16 / 128 = 1/8
/// of its share of the tiles' flops.
inline constexpr std::int64_t gemm_row_split_min_rows = 128;

/// Largest op(B) plus packed op(A), in bytes, that the multi-threaded tile split packs whole before
/// computing (gemm_blocked): four L2s' worth, so the buffers stay within the caches of a few cores.
[[nodiscard]] inline std::int64_t gemm_packed_whole_bytes() { return 4 * cache_sizes().l2; }

/// Block (j0, k0) of an op(B) laid out as gemm_packed_b lays it out (k rows), at `data`: its panels
/// in place (j0 a multiple of NR, so its first panel starts at j0 * k).
template <class T>
[[nodiscard]] inline T* gemm_block_in_place(T* data, std::int64_t k, std::int64_t j0, std::int64_t k0) noexcept {
  return data + j0 * k + k0 * gemm_nr;
}

/// Contiguous copies of a packed block's dot columns out of its panels (the block's `columns`).
inline void gemm_copy_dot_columns(const gemm_packed_block& pb, float* columns) noexcept {
  for (std::int64_t t = 0; t < pb.blk.dot_columns; ++t) {
    const std::int64_t j = pb.blk.tiled + t;
    const float* panel = pb.b + j / gemm_nr * pb.panel_stride + j % gemm_nr;
    for (std::int64_t p = 0; p < pb.kc; ++p) columns[t * pb.kc + p] = panel[p * gemm_nr];
  }
}

/// How gemm_blocked's threads share the work (see gemm_blocked), and how many take part.
enum class gemm_split_kind { column, row, tile_packed_whole, tile_per_block };
struct gemm_split {
  gemm_split_kind kind;
  int threads;
};

/// One product of gemm_blocked: its operands, its blocking, and the ways of running it.
template <class PackB>
struct gemm_blocked_product {
  static constexpr bool prepacked = std::same_as<std::remove_cvref_t<PackB>, gemm_packed_b>;

  std::int64_t m, n, k;
  float alpha;
  const strided_matrix& a;
  PackB& pack_b;
  float beta;
  const float* bias;
  const strided_output& c;
  const float* residual;
  activation act;
  std::int64_t kc_max = balanced_block(k, gemm_blocking().kc, 1);
  std::int64_t nc_max = balanced_block(n, gemm_blocking().nc, gemm_nr);
  // Rows of op(A) that are contiguous in k are read in place; others are packed per row panel.
  bool a_in_place = a.cs == 1;
  std::int64_t row_panels = (m + gemm_mr - 1) / gemm_mr;
  // NR-wide panels counted over all of n (nc_max is a multiple of NR, so the blocks' panels are
  // these).
  std::int64_t panels = (n + gemm_nr - 1) / gemm_nr;

  /// Work items [t_begin, t_end) of one row panel of a packed block: tiles t, and with t == tiles
  /// the dot-product columns. What depends only on the row panel is set up once for all of them,
  /// so a tile costs its micro-kernel call and little else. `a_packed` holds op(A)'s row panels for
  /// the block's k range when op(A) is not read in place.
  void run_row_panel(const gemm_packed_block& pb, std::int64_t panel, std::int64_t t_begin, std::int64_t t_end,
                     const float* a_packed) const {
    const gemm_column_block& blk = pb.blk;
    const std::int64_t k0 = pb.k0, kc = pb.kc;
    const bool first_block = k0 == 0;      // later k blocks accumulate onto what it wrote
    const bool last_block = k0 + kc == k;  // the epilogue's residual and activation go here
    const std::int64_t i0 = panel * gemm_mr, rows = std::min(gemm_mr, m - i0);
    const float* const a_src = a_in_place ? a.data + i0 * a.rs + k0 : a_packed + panel * gemm_mr * kc;
    float* const c_rows = c.data + i0 * c.rs;
    const float* const residual_rows = last_block && residual != nullptr ? residual + i0 * c.rs : nullptr;
    gemm_epilogue epilogue{alpha, first_block ? beta : 1.0f, first_block && bias != nullptr ? bias + i0 : nullptr};
    if (last_block) epilogue.act = act;
    const gemm_tile_fn whole_tile = gemm_tile_update_for(rows, gemm_nr, !a_in_place);
    // Locals, not the members, so they stay in registers across the tile calls.
    const std::int64_t a_rs = a.rs, c_rs = c.rs, c_cs = c.cs, panel_stride = pb.panel_stride;
    const std::int64_t tile_end = std::min(t_end, blk.tiles), tiled_end = blk.j0 + blk.tiled;
    // A row panel's first tile reads its rows of op(A) from memory, the others from L1: the first
    // prefetches the next panel (when whole), which 1x1 convolutions' weights otherwise miss on.
    const float* const next_panel = a_in_place && i0 + 2 * gemm_mr <= m ? a_src + gemm_mr * a_rs : nullptr;
    const float* b = pb.b + t_begin * panel_stride;
    for (std::int64_t t = t_begin, j = blk.j0 + t_begin * gemm_nr; t < tile_end; ++t, j += gemm_nr, b += panel_stride) {
      const std::int64_t cols = std::min(gemm_nr, tiled_end - j);
      if (residual_rows != nullptr) epilogue.residual = residual_rows + j * c_cs;
      (cols == gemm_nr ? whole_tile : gemm_tile_update_for(rows, cols, !a_in_place))(
          kc, a_src, a_rs, b, cols, epilogue, c_rows + j * c_cs, c_rs, c_cs, t == 0 ? next_panel : nullptr);
    }
    if (t_end <= blk.tiles) return;
    for (std::int64_t d = 0; d < blk.dot_columns; ++d) {
      const std::int64_t j = blk.j0 + blk.tiled + d;
      gemm_dot_rows(i0, rows, kc, alpha, strided_matrix{a.data + k0, a.rs, 1}, pb.columns + d * kc, epilogue.beta,
                    first_block ? bias : nullptr, c.data + j * c.cs, c.rs);
      const float* const r = residual_rows != nullptr ? residual_rows + j * c.cs : nullptr;
      if (epilogue.act != activation::none || r != nullptr) finish_run(c_rows + j * c.cs, rows, c.rs, r, epilogue.act);
    }
  }

  /// Work items [lo, hi) of a packed block, numbered row-major over (row panel, t), a row panel at
  /// a time.
  void run_items(const gemm_packed_block& pb, std::int64_t lo, std::int64_t hi, const float* a_packed) const {
    const std::int64_t per_row = pb.blk.items_per_row;
    for (std::int64_t item = lo; item < hi;) {
      const std::int64_t panel = item / per_row, t = item % per_row, t_end = std::min(per_row, t + (hi - item));
      run_row_panel(pb, panel, t, t_end, a_packed);
      item += t_end - t;
    }
  }

  /// Block (j0, k0) of op(B) packed beforehand (null when the driver packs).
  [[nodiscard]] const float* packed_once(std::int64_t j0, std::int64_t k0) const noexcept {
    if constexpr (prepacked) return gemm_block_in_place(pack_b.data, k, j0, k0);
    return nullptr;
  }

  /// First column of NR-wide panel q (n past the last).
  [[nodiscard]] std::int64_t first_column(std::int64_t q) const noexcept { return std::min(n, q * gemm_nr); }

  /// The column split's shares of whole panels with about n / split columns each: share s is panels
  /// [first_panel(s), first_panel(s + 1)), the first panel whose first column is nearest s * n / split.
  [[nodiscard]] std::int64_t first_panel(std::int64_t s, int split) const noexcept {
    if (s == split) return panels;
    const std::int64_t target = n * s / split;
    std::int64_t q = 0;
    while (q < panels && 2 * first_column(q + 1) <= 2 * target + gemm_nr) ++q;
    return q;
  }

  /// Whether the column split's shares among `split` threads each hold enough panels and not too
  /// many columns (gemm_column_split_min_panels, gemm_column_split_imbalance_tenths).
  [[nodiscard]] bool column_split_balanced(int split) const noexcept {
    bool balanced = a_in_place && split > 1;
    for (std::int64_t s = 0; balanced && s < split; ++s) {
      const std::int64_t lo = first_panel(s, split), hi = first_panel(s + 1, split);
      balanced = hi - lo >= gemm_column_split_min_panels &&
                 (first_column(hi) - first_column(lo)) * split * 10 <= n * gemm_column_split_imbalance_tenths;
    }
    return balanced;
  }

  /// The thread strategy and its thread count, taken in gemm_blocked's order of preference.
  [[nodiscard]] gemm_split choose_split() const {
    // A panel costs its tiles' flops over all of k plus its packing (a packed float ~ 32 flops).
    const int split = parallel_chunk_count(0, panels, grain_in_items(grains().gemm_flops, (2 * m + 32) * gemm_nr * k));
    if (column_split_balanced(split)) return {gemm_split_kind::column, split};
    const int workers = parallel_chunk_count(0, row_panels * panels,
                                             grain_in_items(grains().gemm_flops, 2 * gemm_mr * gemm_nr * k));
    const std::int64_t row_grain = std::max(gemm_row_split_min_rows / gemm_mr,
                                            grain_in_items(grains().gemm_flops, 2 * gemm_mr * n * k));
    const int row_split = a_in_place ? parallel_chunk_count(0, row_panels, row_grain) : 1;
    if (row_split > 1 && row_split >= workers) return {gemm_split_kind::row, row_split};
    if (workers > 1 && (whole_b_floats() + whole_a_floats()) * std::int64_t{sizeof(float)} <= gemm_packed_whole_bytes())
      return {gemm_split_kind::tile_packed_whole, workers};
    return {gemm_split_kind::tile_per_block, workers};
  }

  /// Floats of op(B) and of op(A) packed whole (0 for an operand that is not packed).
  [[nodiscard]] std::int64_t whole_b_floats() const noexcept { return prepacked ? 0 : gemm_packed_b_size(k, n); }
  [[nodiscard]] std::int64_t whole_a_floats() const noexcept { return a_in_place ? 0 : row_panels * gemm_mr * k; }

  /// Per-chunk buffers of kc_max x nc_max floats for `chunks` threads packing op(B) each for itself
  /// (none when op(B) comes packed).
  [[nodiscard]] float* share_buffers(int chunks) const {
    return prepacked ? nullptr
                     : scratch(scratch_slot::gemm_b_panels, static_cast<std::size_t>(chunks * kc_max * nc_max));
  }

  /// Columns [col_lo, col_hi) (both multiples of NR, or col_hi == n) against row panels [row_lo,
  /// row_hi), op(B) packed per (column block, k block) into chunk `chunk`'s buffer of `buffers`
  /// (share_buffers): one thread's share of the column split or of the row split. The share is cut
  /// into blocks of its own, at most nc_max wide, so each row panel of op(A) is read once per block
  /// for all the share's tiles in it (not once more where the share crosses a block of the whole
  /// product). Blocks start at multiples of NR, so the dot columns are the same as in any other
  /// blocking: the last n % simd_width of n, if few enough.
  void run_share(float* buffers, int chunk, std::int64_t col_lo, std::int64_t col_hi, std::int64_t row_lo,
                 std::int64_t row_hi) const {
    float* const b = prepacked ? nullptr : buffers + chunk * kc_max * nc_max;
    std::array<float, gemm_dot_columns * gemm_kc> columns;
    const std::int64_t block = balanced_block(col_hi - col_lo, nc_max, gemm_nr);
    for (std::int64_t j0 = col_lo; j0 < col_hi; j0 += block) {
      const gemm_column_block blk(j0, std::min(block, col_hi - j0), a_in_place);
      for (std::int64_t k0 = 0; k0 < k; k0 += kc_max) {
        const std::int64_t kc = std::min(kc_max, k - k0);
        if constexpr (!prepacked) pack_b(b, k0, kc, j0, blk.nc);
        const gemm_packed_block pb{blk, k0, kc, prepacked ? packed_once(j0, k0) : b, gemm_nr * (prepacked ? k : kc),
                                   columns.data()};
        gemm_copy_dot_columns(pb, columns.data());
        for (std::int64_t panel = row_lo; panel < row_hi; ++panel)
          run_row_panel(pb, panel, 0, blk.items_per_row, nullptr);
      }
    }
  }

  /// Column split: each of `split` threads runs its share of the panels against every row panel.
  void run_column_split(int split) const {
    float* const buffers = share_buffers(split);
    parallel_for(0, split, 1, [&](int chunk, std::int64_t, std::int64_t) {
      run_share(buffers, chunk, first_column(first_panel(chunk, split)), first_column(first_panel(chunk + 1, split)),
                0, row_panels);
    });
  }

  /// Row split: each of `split` threads runs its range of row panels against all of op(B).
  void run_row_split(int split) const {
    float* const buffers = share_buffers(split);
    parallel_for(0, split, 1, [&](int chunk, std::int64_t, std::int64_t) {
      run_share(buffers, chunk, 0, n, row_panels * chunk / split, row_panels * (chunk + 1) / split);
    });
  }

  /// Every k block of op(B) into b_whole (laid out as gemm_packed_b; unless packed beforehand) and
  /// of a packed op(A) into a_whole (unless read in place), in one region split over (k block,
  /// panel) items.
  void pack_whole(float* b_whole, float* a_whole) const {
    const std::int64_t pack_items = (prepacked ? 0 : panels) + (a_in_place ? 0 : row_panels);
    if (pack_items == 0) return;
    parallel_for(0, (k + kc_max - 1) / kc_max * pack_items, grain_in_items(grains().gemm_flops, 32 * kc_max * gemm_nr),
                 [&](std::int64_t lo, std::int64_t hi) {
                   for (std::int64_t item = lo; item < hi; ++item) {
                     const std::int64_t k0 = item / pack_items * kc_max, kc = std::min(kc_max, k - k0);
                     const std::int64_t p = item % pack_items;
                     if constexpr (!prepacked)
                       if (p < panels) {
                         pack_b(gemm_block_in_place(b_whole, k, p * gemm_nr, k0), k0, kc, p * gemm_nr,
                                std::min(gemm_nr, n - p * gemm_nr));
                         continue;
                       }
                     const std::int64_t panel = prepacked ? p : p - panels;
                     gemm_pack_a(a, panel * gemm_mr, std::min(gemm_mr, m - panel * gemm_mr), k0, kc,
                                 a_whole + k0 * row_panels * gemm_mr + panel * gemm_mr * kc);
                   }
                 });
  }

  /// Tile split with everything packed first (pack_whole), then one region where each of `workers`
  /// threads takes the same share of every block's items through all k blocks.
  void run_tile_split_packed_whole(int workers) const {
    float* const b_whole =
        prepacked ? nullptr : scratch(scratch_slot::gemm_b_panels, static_cast<std::size_t>(whole_b_floats()));
    float* const a_whole =
        a_in_place ? nullptr : scratch(scratch_slot::gemm_a_panels, static_cast<std::size_t>(whole_a_floats()));
    pack_whole(b_whole, a_whole);
    const float* const b_packed = prepacked ? packed_once(0, 0) : b_whole;  // whole, in gemm_packed_b's layout
    parallel_for(0, workers, 1, [&](int worker, std::int64_t, std::int64_t) {
      std::array<float, gemm_dot_columns * gemm_kc> columns;
      for (std::int64_t k0 = 0; k0 < k; k0 += kc_max) {
        const std::int64_t kc = std::min(kc_max, k - k0);
        for (std::int64_t j0 = 0; j0 < n; j0 += nc_max) {
          const gemm_column_block blk(j0, std::min(nc_max, n - j0), a_in_place);
          const std::int64_t items_per_row = blk.items_per_row, items = row_panels * items_per_row;
          const gemm_packed_block pb{blk, k0, kc, gemm_block_in_place(b_packed, k, j0, k0), gemm_nr * k,
                                     columns.data()};
          const std::int64_t lo = items * worker / workers, hi = items * (worker + 1) / workers;
          // With dot columns, t == tiles ends every row panel: the first such item from lo on.
          if (blk.dot_columns > 0 && lo - lo % items_per_row + blk.tiles < hi) gemm_copy_dot_columns(pb, columns.data());
          run_items(pb, lo, hi, a_in_place ? nullptr : a_whole + k0 * row_panels * gemm_mr);
        }
      }
    });
  }

  /// Streamed panels, on the calling thread, for an op(B) packed beforehand, n a multiple of NR and
  /// k within one k block (k <= gemm_blocking().kc), without residual or activation: panel by panel
  /// of op(B), every row panel of op(A) (read in place) against the panel while it is in L1, each
  /// tile prefetching half of the next panel (after the last, `next`: what the caller reads next,
  /// or null). For few rows of op(A), where each element of op(B) is used by few rows and the
  /// product is bound by reading op(B). One k block, the same micro-kernel and store as the other
  /// strategies: the same bits.
  void run_streamed_panels(const float* next) const
    requires prepacked
  {
    constexpr std::int64_t half_panel = gemm_nr / 2;  // floats per k of one half of a panel's lines
    const gemm_epilogue epilogue{alpha, beta, bias};
    const std::int64_t whole_panels = n / gemm_nr;
    for (std::int64_t j = 0; j < whole_panels; ++j) {
      const float* const b = gemm_block_in_place(pack_b.data, k, j * gemm_nr, 0);
      const float* const next_b = j + 1 < whole_panels ? b + k * gemm_nr : next;
      for (std::int64_t i = 0; i < row_panels; ++i) {
        const std::int64_t rows = std::min(gemm_mr, m - i * gemm_mr);
        gemm_tile_updates<false, 2, gemm_prefetch::next_panel>[rows - 1](
            k, a.data + i * gemm_mr * a.rs, a.rs, b, gemm_nr, epilogue, c.data + i * gemm_mr * c.rs + j * gemm_nr * c.cs,
            c.rs, c.cs, next_b != nullptr ? next_b + i % 2 * k * half_panel : nullptr);
      }
    }
  }

  /// Tile split per block: k blocks outermost, so a packed op(A) is packed once per k block (all
  /// its row panels, in parallel) and read by every column block; per column block, its panels of
  /// op(B) are packed in parallel, then its tiles split. Each output tile still sees the k blocks in
  /// ascending order.
  void run_tile_split_per_block() const {
    float* const b_panels =
        prepacked ? nullptr : scratch(scratch_slot::gemm_b_panels, static_cast<std::size_t>(kc_max * nc_max));
    float* const a_panels = a_in_place ? nullptr
                                       : scratch(scratch_slot::gemm_a_panels,
                                                 static_cast<std::size_t>(row_panels * gemm_mr * kc_max));
    for (std::int64_t k0 = 0; k0 < k; k0 += kc_max) {
      const std::int64_t kc = std::min(kc_max, k - k0);
      if (!a_in_place)
        parallel_for(0, row_panels, grain_in_items(grains().gemm_flops, 32 * kc * gemm_mr),
                     [&](std::int64_t lo, std::int64_t hi) {
                       for (std::int64_t panel = lo; panel < hi; ++panel)
                         gemm_pack_a(a, panel * gemm_mr, std::min(gemm_mr, m - panel * gemm_mr), k0, kc,
                                     a_panels + panel * gemm_mr * kc);
                     });
      for (std::int64_t j0 = 0; j0 < n; j0 += nc_max) {
        const gemm_column_block blk(j0, std::min(nc_max, n - j0), a_in_place);
        // Packing a float (a copy, or an im2col gather) costs about as long as 32 flops of the tiles.
        if constexpr (!prepacked)
          parallel_for(0, blk.panels, grain_in_items(grains().gemm_flops, 32 * kc * gemm_nr),
                       [&](std::int64_t lo, std::int64_t hi) {
                         const std::int64_t first = lo * gemm_nr, last = std::min(blk.nc, hi * gemm_nr);
                         pack_b(b_panels + first * kc, k0, kc, j0 + first, last - first);
                       });
        std::array<float, gemm_dot_columns * gemm_kc> columns;
        const gemm_packed_block pb{blk, k0, kc, prepacked ? packed_once(j0, k0) : b_panels,
                                   gemm_nr * (prepacked ? k : kc), columns.data()};
        gemm_copy_dot_columns(pb, columns.data());
        parallel_for(0, row_panels * blk.items_per_row,
                     grain_in_items(grains().gemm_flops, 2 * gemm_mr * gemm_nr * kc),
                     [&](std::int64_t lo, std::int64_t hi) { run_items(pb, lo, hi, a_panels); });
      }
    }
  }
};

/// C = alpha * op(A) op(B) + bias + beta * C for m, n, k > 0, where op(A) is `a` (m x k), op(B) (k x n)
/// is either packed block by block as the driver goes (`b` a callable: b(dst, k0, kc, j0, nc) writes
/// what gemm_pack_b would) or packed once beforehand (`b` a gemm_packed_b: no packing at all; the
/// same bits as the callable packing the same matrix), and the optional bias holds one value per
/// row of C. The optional residual (laid out like C) is added and `act` applied as each tile of the
/// last k block is stored, while it is in registers (the convolution epilogue).
///
/// The blocks do not depend on the thread count: n is cut into blocks of nc_max columns, k into
/// blocks of kc_max, and each output tile is the same micro-kernel over the same k blocks in the same
/// order, whichever thread runs it; k is never split (that would change the summation order), so
/// results are bit-identical at any thread count. Threads split the work in one of four ways, the
/// first that applies (gemm_blocked_product::choose_split):
/// - column split, when op(A)'s rows are read in place and C has enough NR-wide column panels for
///   every thread (the GEMMs of batch-1 convolutions on planes of 14x14 and more): one parallel region for
///   the whole product; each thread takes a contiguous range of panels over all of n, packs them
///   into its own buffer and runs every row panel against them, so what it packs stays in its own
///   cache and no thread waits for another's packing.
/// - row split, when op(A)'s rows are read in place, the column split is not taken and C has at
///   least gemm_row_split_min_rows rows for each thread the tile split would use (the GEMMs of
///   batch-1 convolutions on 7x7 planes with 256 filters and more): one region; each thread packs
///   all of op(B) into its own buffer and runs its contiguous range of row panels against it.
///   Packing is repeated on every thread, but there is no join between packing and tiles, and no
///   thread reads op(B) lines another core wrote.
/// - tile split with everything packed first, when more than one thread takes part and the packed
///   operands fit in gemm_packed_whole_bytes(): op(B) and a packed op(A) are packed whole in one
///   region (split over (k block, panel) items), then one more region runs all the tiles, each
///   thread taking the same share of every block's items. Two joins per call instead of two per k
///   block, and a 7x7 plane's two panels are packed on both threads, not on one.
/// - tile split per block otherwise: per k block, a packed op(A)'s row panels are packed in
///   parallel into one shared buffer, once for all column blocks; per block of op(B), its panels
///   are packed in parallel into another, then the block's tiles (row panel x column panel,
///   row-major) are split.
template <class PackB>
inline void gemm_blocked(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const strided_matrix& a,
                         PackB&& pack_b, float beta, const float* bias, const strided_output& c,
                         const float* residual = nullptr, activation act = activation::none) {
  const gemm_blocked_product<std::remove_reference_t<PackB>> product{m,    n,    k, alpha,    a,
                                                                     pack_b, beta, bias, c, residual, act};
  const gemm_split split = product.choose_split();
  switch (split.kind) {
    case gemm_split_kind::column: product.run_column_split(split.threads); return;
    case gemm_split_kind::row: product.run_row_split(split.threads); return;
    case gemm_split_kind::tile_packed_whole: product.run_tile_split_packed_whole(split.threads); return;
    case gemm_split_kind::tile_per_block: product.run_tile_split_per_block(); return;
  }
}

/// C = alpha * op(A) op(B) + bias + beta * C through gemm_blocked_product's streamed panels, on the
/// calling thread (its preconditions apply), `next` prefetched while the last panel is read.
inline void gemm_streamed_panels(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const strided_matrix& a,
                                 gemm_packed_b b, float beta, const float* bias, const strided_output& c,
                                 const float* next) {
  const gemm_blocked_product<gemm_packed_b> product{m, n, k, alpha, a, b, beta, bias, c, nullptr, activation::none};
  product.run_streamed_panels(next);
}

/// Rough cycle count of gemm_blocked with these operands, to choose between computing C and C^T:
/// FMA work padded to whole NR panels, packing (a transposing copy costs ~4x a row copy), and
/// element-wise stores of each k block when C's rows are not contiguous.
inline double gemm_estimated_cycles(std::int64_t m, std::int64_t n, std::int64_t k, const strided_matrix& a,
                                    const strided_matrix& b, const strided_output& c) {
  const auto copy_cost = [](bool contiguous) { return contiguous ? 0.25 : 1.0; };
  const double n_padded = static_cast<double>((n + gemm_nr - 1) / gemm_nr * gemm_nr);
  const double fma = static_cast<double>(m) * n_padded * static_cast<double>(k) / (2.0 * simd_width);
  const double pack_b = static_cast<double>(k) * static_cast<double>(n) * copy_cost(b.cs == 1);
  const double pack_a = a.cs == 1 ? 0.0 : static_cast<double>(m) * static_cast<double>(k) * copy_cost(a.rs == 1);
  const double store = c.cs == 1 ? 0.0
                                  : static_cast<double>(m) * static_cast<double>(n) *
                                        static_cast<double>((k + gemm_blocking().kc - 1) / gemm_blocking().kc);
  return fma + pack_b + pack_a + store;
}

}  // namespace tracemod::kernels::detail
