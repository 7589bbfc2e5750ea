// How much work a kernel gives each thread at least. Below twice its grain a kernel runs on the
// calling thread: a parallel_for costs a fork and a join, which small problems cannot repay. The
// grains come from measurements (bench/bench_parallel.cpp; docs/kernels.md, "Grains", has the
// figures): a thread's share must take at least about twice a fork-join (7 us measured with
// OMP_WAIT_POLICY=passive on a loaded 2-core machine, 1-3 us on an idle one) at the single-thread
// rate of the family's kernel, rounded to a power of two.
#pragma once

#include <tracemod/core/parallel.hpp>

#include <algorithm>
#include <cstdint>

namespace tracemod::kernels::detail {

/// Minimum work per chunk of each kernel family, in the unit the comment names.
struct parallel_grains {
  std::int64_t elementwise = 1 << 14;  ///< output floats of a unary/binary/fused elementwise pass (0.5 ns each)
  std::int64_t copy = 1 << 15;         ///< floats moved by transpose / concat (0.4 ns each at the L2 copy rate)
  std::int64_t plane = 1 << 14;        ///< input floats read by pooling / batch norm / softmax / reductions
  std::int64_t gemm_flops = 1 << 20;   ///< 2 x multiply-adds of GEMM tiles (~100 GFLOP/s); a packed float counts 32
};

/// The grains in force. Mutable only so the sweep in bench/bench_parallel.cpp can lower them.
inline parallel_grains& grains() noexcept {
  static parallel_grains g;
  return g;
}

/// Grain in items of `per_item` units each, for a per-unit grain: ceil(grain / per_item), >= 1.
[[nodiscard]] inline std::int64_t grain_in_items(std::int64_t grain, std::int64_t per_item) noexcept {
  per_item = std::max<std::int64_t>(per_item, 1);
  return std::max<std::int64_t>((grain + per_item - 1) / per_item, 1);
}

/// For kernels over a tensor viewed as [outer, len, inner] whose outputs at (o, j) are independent:
/// calls f(o, first, last) for column ranges of width `group` (the last may be shorter), the
/// (o, column range) items split across threads with each item reading `len * group` floats.
template <class F>
void parallel_outer_columns(std::int64_t outer, std::int64_t len, std::int64_t inner, std::int64_t group, const F& f) {
  const std::int64_t groups = (inner + group - 1) / group;
  parallel_for(0, outer * groups, grain_in_items(grains().plane, len * std::min(group, inner)),
               [&](std::int64_t lo, std::int64_t hi) {
                 for (std::int64_t item = lo; item < hi; ++item) {
                   const std::int64_t o = item / groups, first = item % groups * group;
                   f(o, first, std::min(inner, first + group));
                 }
               });
}

}  // namespace tracemod::kernels::detail
