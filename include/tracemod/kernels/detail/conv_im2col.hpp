// im2col fused into GEMM packing: the columns matrix of one image and group (rows (c, r, s), columns
// output positions) is never materialised; its blocks are written straight into the NR-wide panels
// the GEMM micro-kernel streams. The input is read with its padding materialised (a zero-bordered
// copy when the convolution pads), so no read needs a bounds test.
#pragma once

#include <tracemod/kernels/detail/gemm_driver.hpp>
#include <tracemod/kernels/detail/gemm_micro_kernel.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/detail/pool_strided_load.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

namespace tracemod::kernels::detail {

/// 0, 1, 2, ...: loaded as a batch, the index of each lane.
alignas(buffer_alignment) inline constexpr std::array<float, 16> conv_lane_ids{0, 1, 2,  3,  4,  5,  6,  7,
                                                                               8, 9, 10, 11, 12, 13, 14, 15};
static_assert(simd_width <= conv_lane_ids.size());

/// Geometry of the columns matrix of one image and group, over an input padded on all sides.
struct im2col_source {
  const float* data;                 ///< channels x padded_h x padded_w
  std::int64_t padded_h, padded_w;
  std::int64_t out_w;
  std::int64_t r, s;
  std::int64_t stride_h, stride_w, dil_h, dil_w;
};

/// Rows [first, last) of `channels` planes of h x w copied with pad_h / pad_w zero rows / columns on
/// each side: the padded planes' rows counted across channels (h + 2 pad_h per plane), written to
/// their places in `dst`, which holds all of them.
inline void conv_pad_input_rows(const float* src, std::int64_t h, std::int64_t w, std::int64_t pad_h,
                                std::int64_t pad_w, std::int64_t first, std::int64_t last, float* dst) {
  const std::int64_t wp = w + 2 * pad_w, hp = h + 2 * pad_h;
  std::int64_t ch = first / hp, y = first % hp - pad_h;  // the input row padded row r copies
  for (std::int64_t r = first; r < last; ++r, ++y) {
    if (y == h + pad_h) {
      y = -pad_h;
      ++ch;
    }
    float* row = dst + r * wp;
    if (y < 0 || y >= h) {
      std::fill_n(row, wp, 0.0f);
      continue;
    }
    std::fill_n(row, pad_w, 0.0f);
    std::copy_n(src + (ch * h + y) * w, w, row + pad_w);
    std::fill_n(row + pad_w + w, pad_w, 0.0f);
  }
}

/// The padded copy of one image and group (`channels` planes of h x w at x) for the calling thread,
/// in its conv_input scratch: made by conv_pad_input_rows on the thread's first request for a given
/// `call` (a number from conv_padding_call(), one per convolution call) and `x`, then reused by its
/// later requests. Each thread that packs columns pads for itself: no join between padding and the
/// GEMM, and no thread reads padded rows another core wrote (docs/kernels.md, "im2col GEMM"). The
/// copies hold the same values, so the thread count changes no bit.
inline const float* conv_padded_input(std::uint64_t call, const float* x, std::int64_t channels, std::int64_t h,
                                      std::int64_t w, std::int64_t pad_h, std::int64_t pad_w) {
  struct made_for {
    std::uint64_t call = 0;
    const float* x = nullptr;
  };
  thread_local made_for last;
  const std::int64_t hp = h + 2 * pad_h, wp = w + 2 * pad_w;
  float* const copy = scratch(scratch_slot::conv_input, static_cast<std::size_t>(channels * hp * wp));
  if (last.call != call || last.x != x) {
    conv_pad_input_rows(x, h, w, pad_h, pad_w, 0, channels * hp, copy);
    last = {call, x};
  }
  return copy;
}

/// A number for each call of a convolution that pads through conv_padded_input, never 0.
inline std::uint64_t conv_padding_call() noexcept {
  static std::atomic<std::uint64_t> calls{0};
  return calls.fetch_add(1, std::memory_order_relaxed) + 1;
}

/// How one vector of a panel row is read. Its lanes are consecutive output positions: within an
/// output row they are stride_w apart in the padded input, so with stride 1 or 2 they are runs of
/// such lanes, broken where positions wrap to the next output row. A few runs are read with one
/// load each (load_stride2 with stride 2), blended, and lanes past the block's last column zeroed;
/// more runs are read lane by lane.
struct im2col_vector {
  static constexpr std::int64_t max_runs = 4;
  static constexpr std::int64_t gathered = max_runs + 1;
  std::int64_t runs;                            ///< 0 for pure padding, `gathered`, or 1..max_runs
  std::int64_t valid;                           ///< lanes holding columns of the block
  std::array<std::int64_t, max_runs> start{};   ///< first lane of each run
  std::array<std::int64_t, max_runs> offset{};  ///< where a run load puts each run's lanes in place
};

/// simd_width floats Step apart from p (Step 1 or 2), reading only p[0, Step (simd_width - 1)].
template <std::int64_t Step>
inline fbatch im2col_run_load(const float* p) noexcept {
  if constexpr (Step == 1)
    return fbatch::load_unaligned(p);
  else
    return load_stride2(p);
}

/// Applies the plan of a vector of 1..max_runs runs of lanes Step apart down `rows` panel rows: row
/// k reads from data + row[k] and goes to out + k * gemm_nr.
template <std::int64_t Step>
inline void conv_pack_runs(const im2col_vector& v, const float* data, const std::int64_t* row, std::int64_t rows,
                           float* out) {
  const fbatch lane_id = fbatch::load_aligned(conv_lane_ids.data());
  std::array<xsimd::batch_bool<float, arch>, im2col_vector::max_runs> from_run;
  for (std::int64_t r = 1; r < v.runs; ++r) from_run[r] = lane_id >= fbatch(static_cast<float>(v.start[r]));
  const auto load = [&](std::int64_t k) {
    const float* base = data + row[k];
    fbatch x = im2col_run_load<Step>(base + v.offset[0]);
    for (std::int64_t r = 1; r < v.runs; ++r) x = xsimd::select(from_run[r], im2col_run_load<Step>(base + v.offset[r]), x);
    return x;
  };
  if (v.valid < static_cast<std::int64_t>(simd_width)) {
    const auto kept = lane_id < fbatch(static_cast<float>(v.valid));
    for (std::int64_t k = 0; k < rows; ++k) xsimd::select(kept, load(k), fbatch(0.0f)).store_aligned(out + k * gemm_nr);
  } else if (v.runs == 1) {
    for (std::int64_t k = 0; k < rows; ++k)
      im2col_run_load<Step>(data + row[k] + v.offset[0]).store_aligned(out + k * gemm_nr);
  } else {
    for (std::int64_t k = 0; k < rows; ++k) load(k).store_aligned(out + k * gemm_nr);
  }
}

/// conv_pack_columns for nc <= gemm_nc. Each row (c, r, s) is the input shifted by (r, s), sampled
/// at the block's output positions, so the reading plan of each vector is made once per block and
/// reused for all kc rows. A run load is taken only when, under the largest shift, it stays inside
/// one padded plane, so no row's loads leave the input; unit-stride runs of whole vectors always
/// do, offsets growing by at least one per lane.
inline void conv_pack_column_block(const im2col_source& src, std::int64_t k0, std::int64_t kc, std::int64_t j0,
                                   std::int64_t nc, float* dst) {
  constexpr auto w = static_cast<std::int64_t>(simd_width);
  constexpr std::int64_t vectors_per_panel = gemm_nr / w;
  const std::int64_t plane = src.padded_h * src.padded_w;
  const std::int64_t vectors = (nc + gemm_nr - 1) / gemm_nr * vectors_per_panel;
  // Lanes of a run are `step` apart; other strides make no runs.
  const std::int64_t step = src.stride_w;
  const bool runs_possible = step == 1 || step == 2;
  const std::int64_t largest_shift = (src.r - 1) * src.dil_h * src.padded_w + (src.s - 1) * src.dil_w;

  // Offsets of the block's output positions.
  std::array<std::int64_t, gemm_nc> offset;
  for (std::int64_t j = 0; j < nc; ++j) {
    const std::int64_t pos = j0 + j;
    offset[j] = pos / src.out_w * src.stride_h * src.padded_w + pos % src.out_w * src.stride_w;
  }
  std::array<im2col_vector, gemm_nc / w> plan;
  for (std::int64_t q = 0; q < vectors; ++q) {
    const std::int64_t* lane = offset.data() + q * w;
    im2col_vector& v = plan[q];
    v.valid = std::clamp<std::int64_t>(nc - q * w, 0, w);
    v.runs = v.valid == 0 ? 0 : runs_possible ? 1 : im2col_vector::gathered;
    for (std::int64_t l = 1; l < v.valid && v.runs <= im2col_vector::max_runs; ++l) {
      if (lane[l] == lane[l - 1] + step) continue;
      if (v.runs++ < im2col_vector::max_runs) v.start[v.runs - 1] = l;
    }
    if (v.runs > im2col_vector::max_runs) v.runs = im2col_vector::gathered;
    for (std::int64_t r = 0; r < std::min(v.runs, im2col_vector::max_runs); ++r) {
      v.offset[r] = lane[v.start[r]] - step * v.start[r];
      if (v.offset[r] < 0 || v.offset[r] + step * (w - 1) + largest_shift >= plane) v.runs = im2col_vector::gathered;
    }
  }

  // Rows go in passes: the offsets of a pass's (c, r, s) rows are tabled, then each vector's plan is
  // applied down the whole pass, so the inner loops carry no per-vector decisions.
  constexpr std::int64_t pass_rows = 128;
  std::array<std::int64_t, pass_rows> row;
  std::int64_t ss = k0 % src.s, rr = k0 / src.s % src.r, ch = k0 / (src.s * src.r);
  for (std::int64_t kb = 0; kb < kc; kb += pass_rows) {
    const std::int64_t rows = std::min(pass_rows, kc - kb);
    for (std::int64_t k = 0; k < rows; ++k) {
      row[k] = ch * plane + rr * src.dil_h * src.padded_w + ss * src.dil_w;
      if (++ss == src.s) {
        ss = 0;
        if (++rr == src.r) {
          rr = 0;
          ++ch;
        }
      }
    }
    for (std::int64_t q = 0; q < vectors; ++q) {
      float* out = dst + q / vectors_per_panel * kc * gemm_nr + kb * gemm_nr + q % vectors_per_panel * w;
      const im2col_vector& v = plan[q];
      const std::int64_t* lane = offset.data() + q * w;
      if (v.runs == 0) {
        for (std::int64_t k = 0; k < rows; ++k) fbatch(0.0f).store_aligned(out + k * gemm_nr);
      } else if (v.runs <= im2col_vector::max_runs) {
        if (step == 1)
          conv_pack_runs<1>(v, src.data, row.data(), rows, out);
        else
          conv_pack_runs<2>(v, src.data, row.data(), rows, out);
      } else {
        // Lane by lane: xsimd 8.1's gather is a chain of lane inserts that g++ does not always
        // inline (3x slower strided convolutions when it does not), and no faster when it does.
        for (std::int64_t k = 0; k < rows; ++k) {
          for (std::int64_t l = 0; l < v.valid; ++l) out[k * gemm_nr + l] = src.data[row[k] + lane[l]];
          for (std::int64_t l = v.valid; l < w; ++l) out[k * gemm_nr + l] = 0.0f;
        }
      }
    }
  }
}

/// Rows [k0, k0 + kc) x columns [j0, j0 + nc) of the columns matrix, laid out as gemm_pack_b lays
/// out op(B).
inline void conv_pack_columns(const im2col_source& src, std::int64_t k0, std::int64_t kc, std::int64_t j0,
                              std::int64_t nc, float* dst) {
  for (std::int64_t c0 = 0; c0 < nc; c0 += gemm_nc)
    conv_pack_column_block(src, k0, kc, j0 + c0, std::min(gemm_nc, nc - c0), dst + c0 * kc);
}

}  // namespace tracemod::kernels::detail
