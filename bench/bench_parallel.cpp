// Where threads start to pay: the measurements behind the grains of kernels/detail/parallel_grain.hpp.
// Each sweep runs a kernel of one family at 1 and 2 threads with every grain lowered to 1 (so even
// the smallest size is split); a family's grain is the work per thread at the first size where
// 2 threads beat 1 (docs/kernels.md, "Grains", lists the figures).
//
//   BM_parallel_for_overhead/threads  fork and join of an empty parallel_for
//   BM_grain_elementwise/n/threads    relu over n floats (grain: elementwise, floats)
//   BM_grain_copy/n/threads           transpose of [64, n / 64] (grain: copy, floats)
//   BM_grain_plane/n/threads          batch_norm_inference over [1, 64, n / 64] (grain: plane, floats)
//   BM_grain_gemm/n/threads           n x n x n GEMM (grain: gemm_flops, 2 n^3)
#include "threads.hpp"

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/batch_norm.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>
#include <tracemod/kernels/elementwise.hpp>
#include <tracemod/kernels/gemm.hpp>
#include <tracemod/kernels/layout.hpp>

#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <vector>

namespace tmod_bench_parallel {

namespace {

namespace k = tracemod::kernels;

/// Every grain 1 for its lifetime.
class no_grains {
 public:
  no_grains() : saved_(k::detail::grains()) { k::detail::grains() = {1, 1, 1, 1}; }
  ~no_grains() { k::detail::grains() = saved_; }
  no_grains(const no_grains&) = delete;
  no_grains& operator=(const no_grains&) = delete;

 private:
  k::detail::parallel_grains saved_;
};

std::vector<float> filled(std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * 0.01f - 0.4f;
  return v;
}

void sweep(benchmark::internal::Benchmark* b, std::int64_t first, std::int64_t last, std::int64_t factor) {
  b->ArgNames({"n", "threads"})->UseRealTime();
  for (std::int64_t n = first; n <= last; n *= factor)
    for (const std::int64_t t : tracemod::bench::bench_thread_counts) b->Args({n, t});
}

void BM_parallel_for_overhead(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 0);
  for (auto _ : state)
    tracemod::parallel_for(0, 2, 1, [](std::int64_t lo, std::int64_t) { benchmark::DoNotOptimize(lo); });
}
BENCHMARK(BM_parallel_for_overhead)->Apply(tracemod::bench::over_threads);

void BM_grain_elementwise(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 1);
  const no_grains fine;
  const std::int64_t n = state.range(0);
  const auto x = filled(n);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    k::unary(k::relu_op{}, x.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
}
BENCHMARK(BM_grain_elementwise)->Apply([](auto* b) { sweep(b, 1 << 10, 1 << 18, 2); });

void BM_grain_copy(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 1);
  const no_grains fine;
  const std::int64_t n = state.range(0);
  const tracemod::Shape shape{64, n / 64};
  const std::array<std::size_t, 2> perm{1, 0};
  const auto x = filled(n);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    k::transpose(x.data(), shape, perm, y.data());
    benchmark::DoNotOptimize(y.data());
  }
}
BENCHMARK(BM_grain_copy)->Apply([](auto* b) { sweep(b, 1 << 10, 1 << 18, 2); });

void BM_grain_plane(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 1);
  const no_grains fine;
  const std::int64_t n = state.range(0);
  const auto x = filled(n);
  const std::vector<float> mean(64, 0.1f), var(64, 2.0f);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    k::batch_norm_inference(x.data(), y.data(), 1, 64, static_cast<std::size_t>(n / 64), mean.data(), var.data(),
                            nullptr, nullptr, 1e-5f);
    benchmark::DoNotOptimize(y.data());
  }
}
BENCHMARK(BM_grain_plane)->Apply([](auto* b) { sweep(b, 1 << 10, 1 << 18, 2); });

void BM_grain_gemm(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 1);
  const no_grains fine;
  const std::int64_t n = state.range(0);
  const auto a = filled(n * n), b = filled(n * n);
  std::vector<float> c(a.size());
  for (auto _ : state) {
    k::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["flops"] = 2.0 * static_cast<double>(n * n * n);
}
BENCHMARK(BM_grain_gemm)->Apply([](auto* b) {
  b->ArgNames({"n", "threads"})->UseRealTime();
  for (const std::int64_t n : {16, 24, 32, 48, 64, 96, 128})
    for (const std::int64_t t : tracemod::bench::bench_thread_counts) b->Args({n, t});
});

}  // namespace

}  // namespace tmod_bench_parallel
