// Memory-bound kernels against a memcpy that moves as many bytes: max_pool2d, batch_norm
// inference, softmax, adaptive_avg_pool2d, and the row normalisation of layer_norm and group_norm. Bytes are counted as everywhere in bench/ (bytes
// read + bytes written, write-allocate not counted; see docs/kernels.md): a kernel reading `in` and
// writing `out` bytes moves in + out, a memcpy of n bytes moves 2n. Each kernel benchmark reports a
// counter "vs_memcpy" = its CPU time / the CPU time of memcpy(dst, src, (in + out) / 2), measured in
// the same process on buffers of that size; BM_memcpy/<n> lists the same baselines as benchmarks
// of their own, with the same byte count.
#include "machine_limits.hpp"
#include "threads.hpp"

#include <tracemod/kernels/batch_norm.hpp>
#include <tracemod/kernels/layer_norm.hpp>
#include <tracemod/kernels/pooling.hpp>
#include <tracemod/kernels/softmax.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <time.h>
#include <vector>

namespace tmod_bench_norm_pool {

namespace {

namespace k = tracemod::kernels;
using tracemod::bench::report_bytes;

std::vector<float> random_values(std::size_t count) {
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

// CPU time of this thread, the clock Google Benchmark's "CPU" column uses: unlike wall time it
// does not count the time other processes on this shared machine hold the core.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// CPU seconds per memcpy of `bytes`: the median of 5 loops of at least 20 ms each.
double memcpy_seconds(std::size_t bytes) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::array<double, 5> samples{};
  std::size_t reps = 1;
  for (double& sample : samples) {
    for (;;) {
      const double start = thread_cpu_seconds();
      for (std::size_t r = 0; r < reps; ++r) {
        std::memcpy(dst.data(), src.data(), bytes);
        benchmark::DoNotOptimize(dst.data());
        benchmark::ClobberMemory();
      }
      const double elapsed = thread_cpu_seconds() - start;
      if (elapsed >= 0.02) {
        sample = elapsed / static_cast<double>(reps);
        break;
      }
      reps *= 2;
    }
  }
  std::nth_element(samples.begin(), samples.begin() + 2, samples.end());
  return samples[2];
}

// Counters for a kernel that reads `in_floats` and writes `out_floats` per iteration.
void report(benchmark::State& state, std::size_t in_floats, std::size_t out_floats) {
  const std::size_t bytes = (in_floats + out_floats) * sizeof(float);
  report_bytes(state, static_cast<double>(bytes));
  // Measured once per size: benchmark functions run several times (sizing, repetitions).
  static std::map<std::size_t, double> baseline;
  const auto [it, fresh] = baseline.try_emplace(bytes, 0.0);
  if (fresh) it->second = memcpy_seconds(bytes / 2);
  // Time per iteration / memcpy time, as an inverted iteration-invariant rate of the memcpy time.
  state.counters["vs_memcpy"] = benchmark::Counter(
      it->second, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  report_bytes(state, 2.0 * static_cast<double>(bytes));  // read once, written once
}

constexpr std::int64_t floats(std::int64_t n) { return n * static_cast<std::int64_t>(sizeof(float)); }

// Half the input + output bytes of each case below: the copy then reads and writes as many bytes.
BENCHMARK(BM_memcpy)
    ->Arg(floats(64 * 112 * 112 + 64 * 56 * 56) / 2)
    ->Arg(floats(2 * 64 * 56 * 56) / 2)
    ->Arg(floats(2 * 64 * 1000) / 2)
    ->Arg(floats(512 * 7 * 7 + 512) / 2)
    ->Arg(floats(2 * 197 * 768) / 2);

void BM_max_pool2d_3x3s2p1_1x64x112x112(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const k::pool2d_geometry g{.n = 1, .c = 64, .h = 112, .w = 112, .kernel_h = 3, .kernel_w = 3, .stride_h = 2,
                             .stride_w = 2, .pad_h = 1, .pad_w = 1};
  const auto x = random_values(static_cast<std::size_t>(g.n * g.c * g.h * g.w));
  std::vector<float> y(static_cast<std::size_t>(g.n * g.c * g.out_h() * g.out_w()));
  for (auto _ : state) {
    k::max_pool2d(g, x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report(state, x.size(), y.size());
}
BENCHMARK(BM_max_pool2d_3x3s2p1_1x64x112x112)->Apply(tracemod::bench::over_threads);

void BM_batch_norm_inference_1x64x56x56(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 0);
  constexpr std::size_t c = 64, s = 56 * 56;
  const auto x = random_values(c * s);
  std::vector<float> y(c * s), mean(c, 0.1f), var(c, 2.0f), weight(c, 1.5f), bias(c, -0.5f);
  for (auto _ : state) {
    k::batch_norm_inference(x.data(), y.data(), 1, c, s, mean.data(), var.data(), weight.data(), bias.data(), 1e-5f);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report(state, x.size(), y.size());
}
BENCHMARK(BM_batch_norm_inference_1x64x56x56)->Apply(tracemod::bench::over_threads);

void BM_softmax_64x1000_last_axis(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const auto x = random_values(64 * 1000);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    k::softmax(x.data(), y.data(), 64, 1000, 1);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report(state, x.size(), y.size());
}
BENCHMARK(BM_softmax_64x1000_last_axis)->Apply(tracemod::bench::over_threads);

void BM_adaptive_avg_pool2d_1x512x7x7_to_1x1(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const auto x = random_values(512 * 7 * 7);
  std::vector<float> y(512);
  for (auto _ : state) {
    k::adaptive_avg_pool2d(x.data(), y.data(), 1, 512, 7, 7, 1, 1);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report(state, x.size(), y.size());
}
BENCHMARK(BM_adaptive_avg_pool2d_1x512x7x7_to_1x1)->Apply(tracemod::bench::over_threads);

// A ViT-B block's layer_norm: 197 tokens of 768 features, with weight and bias.
void BM_layer_norm_197x768(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 0);
  constexpr std::int64_t rows = 197, d = 768;
  const auto x = random_values(static_cast<std::size_t>(rows * d));
  std::vector<float> y(x.size()), weight(d, 1.5f), bias(d, -0.5f);
  for (auto _ : state) {
    k::normalize_rows(x.data(), y.data(), rows, d, 1, 1, weight.data(), bias.data(), 1e-5);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report(state, x.size(), y.size());
}
BENCHMARK(BM_layer_norm_197x768)->Apply(tracemod::bench::over_threads);

// group_norm with 32 groups on the batch-norm case's (1, 64, 56, 56): 32 rows of 2 channels.
void BM_group_norm_1x64x56x56_g32(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 0);
  constexpr std::int64_t c = 64, s = 56 * 56, groups = 32;
  const auto x = random_values(static_cast<std::size_t>(c * s));
  std::vector<float> y(x.size()), weight(c, 1.5f), bias(c, -0.5f);
  for (auto _ : state) {
    k::normalize_rows(x.data(), y.data(), groups, c / groups, s, groups, weight.data(), bias.data(), 1e-5);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report(state, x.size(), y.size());
}
BENCHMARK(BM_group_norm_1x64x56x56_g32)->Apply(tracemod::bench::over_threads);

}  // namespace

}  // namespace tmod_bench_norm_pool
