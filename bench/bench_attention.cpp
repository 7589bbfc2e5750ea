// scaled_dot_product_attention against the unfused chain it replaces, matmul(q, k^T), mul by the
// scale, softmax on the last axis and matmul with v, at (1, 8 heads, seq 512, d 64), each through
// the functional ops in eager mode. The counter "vs_unfused" = the op's time / the chain's time,
// both measured in the same process (lower is better).
#include "threads.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <time.h>

namespace tmod_bench_attention {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;

constexpr std::int64_t heads = 8, seq = 512, dim = 64;

struct operands {
  tmod::Tensor q = tmod::uniform({1, heads, seq, dim}, -1.f, 1.f, 1);
  tmod::Tensor k = tmod::uniform({1, heads, seq, dim}, -1.f, 1.f, 2);
  tmod::Tensor v = tmod::uniform({1, heads, seq, dim}, -1.f, 1.f, 3);
};

tmod::Tensor unfused(const operands& in) {
  const float scale = 1.f / std::sqrt(static_cast<float>(dim));
  const tmod::Tensor scores = F::matmul(in.q, in.k, false, true) * scale;
  return F::matmul(F::softmax(scores, -1), in.v);
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// CPU seconds of one unfused chain: the best of 5 runs (measured once).
double unfused_seconds(const operands& in) {
  static const double best = [&] {
    double b = 1e30;
    for (int r = 0; r < 5; ++r) {
      const double start = thread_cpu_seconds();
      benchmark::DoNotOptimize(unfused(in).data<float>());
      b = std::min(b, thread_cpu_seconds() - start);
    }
    return b;
  }();
  return best;
}

void BM_sdpa_unfused_1x8x512x64(benchmark::State& state) {
  const tmod::bench::scoped_threads threads(state, 0);
  const operands in;
  for (auto _ : state) benchmark::DoNotOptimize(unfused(in).data<float>());
}
BENCHMARK(BM_sdpa_unfused_1x8x512x64)->Arg(1)->ArgName("threads")->Unit(benchmark::kMillisecond);

void BM_sdpa_1x8x512x64(benchmark::State& state) {
  const tmod::bench::scoped_threads threads(state, 0);
  const operands in;
  const double baseline = unfused_seconds(in);
  for (auto _ : state) benchmark::DoNotOptimize(F::scaled_dot_product_attention(in.q, in.k, in.v).data<float>());
  state.counters["vs_unfused"] =
      benchmark::Counter(baseline, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_sdpa_1x8x512x64)->Arg(1)->ArgName("threads")->Unit(benchmark::kMillisecond);

}  // namespace

}  // namespace tmod_bench_attention
