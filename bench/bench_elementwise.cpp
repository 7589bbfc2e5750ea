// Elementwise kernels against the memory bandwidth they should reach: relu and add on a ResNet
// activation (fits in L2 + L3) and on 16M floats (far beyond the LLC), relu in place, and the
// broadcast path of a per-channel bias add.
#include <tracemod/kernels/elementwise.hpp>

#include "machine_limits.hpp"
#include "threads.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

namespace tmod_bench_elementwise {

namespace {

namespace k = tracemod::kernels;
using tracemod::Shape;
using tracemod::bench::report_bytes;
using tracemod::bench::scoped_threads;
using k::aligned_floats;

constexpr std::int64_t activation = std::int64_t{1} * 64 * 56 * 56;
constexpr std::int64_t large = std::int64_t{16} * 1024 * 1024;
constexpr double bytes_per_float = sizeof(float);

// Value-initialised storage is written once here, so no page fault happens inside the timed loop.
aligned_floats random_floats(std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  aligned_floats v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

void BM_relu(benchmark::State& state) {
  const scoped_threads threads(state, 1);
  const std::int64_t n = state.range(0);
  const auto x = random_floats(n, 1);
  aligned_floats y(static_cast<std::size_t>(n));
  benchmark::DoNotOptimize(y.data());
  for (auto _ : state) {
    k::unary(k::relu_op{}, x.data(), y.data(), n);
    benchmark::ClobberMemory();
  }
  report_bytes(state, 2 * bytes_per_float * static_cast<double>(n));
}
BENCHMARK(BM_relu)->Apply([](auto* b) { tracemod::bench::sizes_over_threads(b, {activation, large}); });

void BM_relu_in_place(benchmark::State& state) {
  const scoped_threads threads(state, 1);
  const std::int64_t n = state.range(0);
  auto x = random_floats(n, 2);
  benchmark::DoNotOptimize(x.data());
  for (auto _ : state) {
    k::unary(k::relu_op{}, x.data(), x.data(), n);
    benchmark::ClobberMemory();
  }
  report_bytes(state, 2 * bytes_per_float * static_cast<double>(n));
}
BENCHMARK(BM_relu_in_place)->Apply([](auto* b) { tracemod::bench::sizes_over_threads(b, {large}); });

void BM_add(benchmark::State& state) {
  const scoped_threads threads(state, 1);
  const std::int64_t n = state.range(0);
  const auto a = random_floats(n, 3);
  const auto b = random_floats(n, 4);
  aligned_floats y(static_cast<std::size_t>(n));
  benchmark::DoNotOptimize(y.data());
  for (auto _ : state) {
    k::binary(k::add_op{}, a.data(), b.data(), y.data(), n);
    benchmark::ClobberMemory();
  }
  report_bytes(state, 3 * bytes_per_float * static_cast<double>(n));
}
BENCHMARK(BM_add)->Apply([](auto* b) { tracemod::bench::sizes_over_threads(b, {activation, large}); });

// x[1,64,56,56] + bias[64,1,1]: 64 rows of 3136 elements, each a tensor-scalar loop.
void BM_add_channel_bias(benchmark::State& state) {
  const scoped_threads threads(state, 0);
  const Shape sx{1, 64, 56, 56}, sb{64, 1, 1};
  const auto x = random_floats(sx.numel(), 5);
  const auto bias = random_floats(sb.numel(), 6);
  aligned_floats y(static_cast<std::size_t>(sx.numel()));
  benchmark::DoNotOptimize(y.data());
  for (auto _ : state) {
    k::binary_broadcast(k::add_op{}, x.data(), sx, bias.data(), sb, y.data(), sx);
    benchmark::ClobberMemory();
  }
  report_bytes(state, bytes_per_float * static_cast<double>(2 * sx.numel() + sb.numel()));
}
BENCHMARK(BM_add_channel_bias)->Apply(tracemod::bench::over_threads);

}  // namespace

}  // namespace tmod_bench_elementwise
