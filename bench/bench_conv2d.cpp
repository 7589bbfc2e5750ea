// conv2d throughput (batch 1, resnet18 shapes) at 1 and 2 threads, against the FMA peak of the cores
// used, measured in the same run.
#include "machine_limits.hpp"
#include "threads.hpp"

#include <tracemod/kernels/conv2d.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {

namespace kern = tracemod::kernels;

std::vector<float> random_floats(std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

void BM_conv2d(benchmark::State& state, kern::conv2d_geometry g) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const std::int64_t out_plane = g.out_h() * g.out_w();
  const auto input = random_floats(g.n * g.c * g.h * g.w, 1);
  const auto weight = random_floats(g.k * (g.c / g.groups) * g.r * g.s, 2);
  const auto bias = random_floats(g.k, 3);
  std::vector<float> out(static_cast<std::size_t>(g.n * g.k * out_plane));
  for (auto _ : state) {
    kern::conv2d(g, input.data(), weight.data(), bias.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double macs = static_cast<double>(g.n * g.k * out_plane * (g.c / g.groups) * g.r * g.s);
  tracemod::bench::report_flops(state, 2.0 * macs, state.range(0));
}

// {n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w}
constexpr kern::conv2d_geometry resnet_3x3(std::int64_t channels, std::int64_t size) {
  return {1, channels, size, size, channels, 3, 3, 1, 1, 1, 1};
}

}  // namespace

BENCHMARK_CAPTURE(BM_conv2d, resnet18_3x3_64_56x56, resnet_3x3(64, 56))
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(0.3);
BENCHMARK_CAPTURE(BM_conv2d, resnet18_3x3_128_28x28, resnet_3x3(128, 28))
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(0.3);
BENCHMARK_CAPTURE(BM_conv2d, resnet18_3x3_256_14x14, resnet_3x3(256, 14))
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(0.3);
BENCHMARK_CAPTURE(BM_conv2d, resnet18_3x3_512_7x7, resnet_3x3(512, 7))
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(0.3);
BENCHMARK_CAPTURE(BM_conv2d, resnet18_stem_7x7s2_3_224x224,
                  kern::conv2d_geometry{1, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(0.3);
BENCHMARK_CAPTURE(BM_conv2d, resnet18_1x1s2_64_128_56x56, kern::conv2d_geometry{1, 64, 56, 56, 128, 1, 1, 2, 2})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(0.3);
BENCHMARK_CAPTURE(BM_conv2d, depthwise_3x3_256_28x28,
                  kern::conv2d_geometry{1, 256, 28, 28, 256, 3, 3, 1, 1, 1, 1, 1, 1, 256})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(0.3);
