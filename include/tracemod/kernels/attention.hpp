// Scaled dot-product attention, softmax(q k^T * scale + mask) v, streamed over blocks of keys with
// an online softmax: the L x S score matrix is never held whole, only one block of query rows
// against one block of keys at a time.
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>
#include <tracemod/kernels/detail/reduce_ops.hpp>
#include <tracemod/kernels/gemm.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace tracemod::kernels {

/// The geometry of one attention call over `batches` independent (q, k, v) triples. The offsets
/// (in floats) of each batch's matrices come from the caller, so broadcast batch dims cost nothing.
/// The mask (nullable) is read at mask_offset[b] + i * mask_row_stride + j * mask_col_stride; a
/// stride of 0 broadcasts it along that axis.
struct attention_geometry {
  std::int64_t batches = 0, L = 0, S = 0, E = 0, Ev = 0;
  float scale = 1.f;
  bool causal = false;  ///< key j is hidden from query i when j > i
  const std::int64_t* q_offset = nullptr;
  const std::int64_t* k_offset = nullptr;
  const std::int64_t* v_offset = nullptr;
  const std::int64_t* mask_offset = nullptr;
  std::int64_t mask_row_stride = 0, mask_col_stride = 0;
};

namespace detail {

/// Query rows and keys per block: a 256 x 256 score block (256 KiB) stays in L2 next to the
/// 256 x Ev accumulator. Each query block packs every key and value block for its GEMMs once, so
/// taller query blocks repack k and v less often (at seq 512, d 64, 64 x 128 blocks take about
/// 1.2x the time of the unfused chain, 256 x 256 blocks about 1x).
inline constexpr std::int64_t attention_query_block = 256;
inline constexpr std::int64_t attention_key_block = 256;

/// The scratch of one query block: its scores, its output accumulator and the running max and sum
/// of each row.
struct attention_scratch {
  std::vector<float> scores, acc, row_max, row_sum;
  attention_scratch(std::int64_t bm, std::int64_t bn, std::int64_t ev)
      : scores(static_cast<std::size_t>(bm * bn)),
        acc(static_cast<std::size_t>(bm * ev)),
        row_max(static_cast<std::size_t>(bm)),
        row_sum(static_cast<std::size_t>(bm)) {}
};

/// Adds the mask and hides causal keys in the scores of rows [i0, i0 + m) against keys [j0, j0 + n).
inline void attention_mask_block(const attention_geometry& g, const float* mask, std::int64_t i0, std::int64_t m,
                                 std::int64_t j0, std::int64_t n, float* s) {
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  for (std::int64_t r = 0; r < m; ++r) {
    float* row = s + r * n;
    if (mask != nullptr) {
      const float* mr = mask + (i0 + r) * g.mask_row_stride + j0 * g.mask_col_stride;
      for (std::int64_t c = 0; c < n; ++c) row[c] += mr[c * g.mask_col_stride];
    }
    if (g.causal)
      for (std::int64_t c = std::max<std::int64_t>(i0 + r + 1 - j0, 0); c < n; ++c) row[c] = neg_inf;
  }
}

/// The online softmax step of one score block: per row, the new running max, the rescaling of the
/// accumulator and running sum by exp(old max - new max), and the scores replaced by exp(s - max).
/// A row whose every score so far is -inf keeps max -inf and contributes zeros.
inline void attention_softmax_block(std::int64_t m, std::int64_t n, std::int64_t ev, float* s, float* acc, float* row_max,
                                    float* row_sum) {
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  for (std::int64_t r = 0; r < m; ++r) {
    float* row = s + r * n;
    const float mx = std::max(row_max[r], row_reduce<max_op>(row, static_cast<std::size_t>(n)));
    if (mx == neg_inf) {
      std::fill_n(row, n, 0.f);
      continue;
    }
    const float correction = std::exp(row_max[r] - mx);  // 0 when the old max is -inf
    const fbatch mb(mx);
    fbatch lanes(0.f);
    std::int64_t c = 0;
    for (; c + static_cast<std::int64_t>(simd_width) <= n; c += static_cast<std::int64_t>(simd_width)) {
      const fbatch e = xsimd::exp(fbatch::load_unaligned(row + c) - mb);
      e.store_unaligned(row + c);
      lanes += e;
    }
    float sum = xsimd::hadd(lanes);
    for (; c < n; ++c) {
      row[c] = std::exp(row[c] - mx);
      sum += row[c];
    }
    if (correction != 1.f) {
      float* a = acc + r * ev;
      for (std::int64_t j = 0; j < ev; ++j) a[j] *= correction;
    }
    row_sum[r] = row_sum[r] * correction + sum;
    row_max[r] = mx;
  }
}

/// Rows [i0, i0 + m) of batch b, written to out.
inline void attention_query_rows(const attention_geometry& g, const float* q, const float* k, const float* v,
                                 const float* mask, float* out, std::int64_t b, std::int64_t i0, std::int64_t m,
                                 attention_scratch& w) {
  const float* qb = q + g.q_offset[b] + i0 * g.E;
  const float* kb = k + g.k_offset[b];
  const float* vb = v + g.v_offset[b];
  const float* mb = mask != nullptr ? mask + g.mask_offset[b] : nullptr;
  std::fill_n(w.acc.begin(), m * g.Ev, 0.f);
  std::fill_n(w.row_max.begin(), m, -std::numeric_limits<float>::infinity());
  std::fill_n(w.row_sum.begin(), m, 0.f);
  // Causal: keys past the block's last row are hidden from all its rows.
  const std::int64_t keys = g.causal ? std::min(g.S, i0 + m) : g.S;
  for (std::int64_t j0 = 0; j0 < keys; j0 += attention_key_block) {
    const std::int64_t n = std::min(attention_key_block, keys - j0);
    gemm(false, true, m, n, g.E, g.scale, qb, g.E, kb + j0 * g.E, g.E, 0.f, w.scores.data(), n);
    attention_mask_block(g, mb, i0, m, j0, n, w.scores.data());
    attention_softmax_block(m, n, g.Ev, w.scores.data(), w.acc.data(), w.row_max.data(), w.row_sum.data());
    gemm(false, false, m, g.Ev, n, 1.f, w.scores.data(), n, vb + j0 * g.Ev, g.Ev, 1.f, w.acc.data(), g.Ev);
  }
  float* ob = out + (b * g.L + i0) * g.Ev;
  for (std::int64_t r = 0; r < m; ++r) {
    // A row with every key hidden sums to 0: NaN, as softmax over all -inf gives.
    const float sum = w.row_sum[static_cast<std::size_t>(r)];
    const float inv = 1.f / sum;
    const float* a = w.acc.data() + r * g.Ev;
    float* o = ob + r * g.Ev;
    if (sum == 0.f)
      std::fill_n(o, g.Ev, std::numeric_limits<float>::quiet_NaN());
    else
      for (std::int64_t c = 0; c < g.Ev; ++c) o[c] = a[c] * inv;
  }
}

}  // namespace detail

/// out (batches, L, Ev) = softmax(q k^T * scale + mask, causal) v for each batch, q (L, E), k (S, E),
/// v (S, Ev) row-major at the geometry's offsets. Each (batch, block of 256 query rows) item is
/// computed whole by one thread in a fixed order (key blocks of 256, GEMMs on fixed shapes): the
/// same bits at any thread count.
inline void scaled_dot_product_attention(const attention_geometry& g, const float* q, const float* k, const float* v,
                                         const float* mask, float* out) {
  if (g.batches == 0 || g.L == 0 || g.Ev == 0) return;
  if (g.S == 0) {  // no keys: the product with an empty v is zeros
    std::fill_n(out, g.batches * g.L * g.Ev, 0.f);
    return;
  }
  const std::int64_t bm = std::min(detail::attention_query_block, g.L);
  const std::int64_t blocks = (g.L + bm - 1) / bm;
  const std::int64_t per_item = 2 * bm * std::max<std::int64_t>(g.S, 1) * (g.E + g.Ev);
  parallel_for(0, g.batches * blocks, detail::grain_in_items(detail::grains().gemm_flops, per_item),
               [&](std::int64_t lo, std::int64_t hi) {
                 detail::attention_scratch w(bm, detail::attention_key_block, g.Ev);
                 for (std::int64_t t = lo; t < hi; ++t) {
                   const std::int64_t b = t / blocks, i0 = (t % blocks) * bm;
                   detail::attention_query_rows(g, q, k, v, mask, out, b, i0, std::min(bm, g.L - i0), w);
                 }
               });
}

}  // namespace tracemod::kernels
