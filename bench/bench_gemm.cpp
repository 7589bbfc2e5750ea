// GEMM throughput at 1 and 2 threads, against the FMA peak of the cores used, measured in the same run.
#include "machine_limits.hpp"
#include "smoke.hpp"
#include "threads.hpp"

#include <tracemod/kernels/gemm.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

namespace tmod_bench_gemm {

namespace {

namespace kern = tracemod::kernels;

struct gemm_shape {
  bool trans_a, trans_b;
  std::int64_t m, n, k;
};

std::vector<float> random_floats(std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

/// C[M,N] = op(A) op(B), every operand a dense row-major buffer of random values.
struct gemm_operands {
  gemm_shape s;
  std::vector<float> a = random_floats(s.m * s.k, 1), b = random_floats(s.k * s.n, 2);
  std::vector<float> c = std::vector<float>(static_cast<std::size_t>(s.m * s.n));

  void run() {
    kern::gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.data(), s.trans_a ? s.m : s.k, b.data(),
               s.trans_b ? s.k : s.n, 0.0f, c.data(), s.n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
};

void BM_gemm(benchmark::State& state, gemm_shape s) {
  const tracemod::bench::scoped_threads threads(state, 0);
  gemm_operands g{s};
  for (auto _ : state) g.run();
  tracemod::bench::report_flops(state, 2.0 * static_cast<double>(s.m * s.n * s.k), state.range(0));
}

/// The same product at 1 and 2 threads alternated (tracemod::bench::run_scaling).
void BM_gemm_scaling(benchmark::State& state, gemm_shape s) {
  gemm_operands g{s};
  tracemod::bench::run_scaling(state, [&g] { g.run(); });
}

}  // namespace

BENCHMARK_CAPTURE(BM_gemm_scaling, square_512, gemm_shape{false, false, 512, 512, 512})
    ->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(tracemod::bench::min_time(2.0));
BENCHMARK_CAPTURE(BM_gemm, square_512, gemm_shape{false, false, 512, 512, 512})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
// nn.Linear: batch 64 times weights [1000, 512], used transposed.
BENCHMARK_CAPTURE(BM_gemm, linear_64x1000x512_bt, gemm_shape{false, true, 64, 1000, 512})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_gemm, square_512_at, gemm_shape{true, false, 512, 512, 512})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.2));
BENCHMARK_CAPTURE(BM_gemm, square_512_bt, gemm_shape{false, true, 512, 512, 512})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.2));
BENCHMARK_CAPTURE(BM_gemm, square_1024, gemm_shape{false, false, 1024, 1024, 1024})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.2));
BENCHMARK_CAPTURE(BM_gemm, odd_500x300x700, gemm_shape{false, false, 500, 300, 700})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.2));
// Batch-1 inference: a matrix-vector product, bound by reading the weights.
BENCHMARK_CAPTURE(BM_gemm, linear_1x1000x512_bt, gemm_shape{false, true, 1, 1000, 512})
    ->Unit(benchmark::kMicrosecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.2));

}  // namespace tmod_bench_gemm
