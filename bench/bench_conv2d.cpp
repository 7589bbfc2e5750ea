// conv2d throughput (batch 1, resnet18 shapes) at 1 and 2 threads, against the FMA peak of the cores
// used, measured in the same run.
#include "machine_limits.hpp"
#include "smoke.hpp"
#include "threads.hpp"

#include <tracemod/kernels/conv2d.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

namespace tmod_bench_conv2d {

namespace {

namespace kern = tracemod::kernels;

std::vector<float> random_floats(std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

void BM_conv2d(benchmark::State& state, kern::conv2d_geometry g,
               kern::conv2d_algorithm algorithm = kern::conv2d_algorithm::automatic) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const std::int64_t out_plane = g.out_h() * g.out_w();
  const auto input = random_floats(g.n * g.c * g.h * g.w, 1);
  const auto weight = random_floats(g.k * (g.c / g.groups) * g.r * g.s, 2);
  const auto bias = random_floats(g.k, 3);
  std::vector<float> out(static_cast<std::size_t>(g.n * g.k * out_plane));
  for (auto _ : state) {
    kern::conv2d(g, input.data(), weight.data(), bias.data(), out.data(), algorithm);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double macs = static_cast<double>(g.n * g.k * out_plane * (g.c / g.groups) * g.r * g.s);
  tracemod::bench::report_flops(state, 2.0 * macs, state.range(0));
}

// Winograd with its filters transformed once, outside the timed loop (inference with prepacked
// weights). GFLOP/s count the direct convolution's multiply-adds, so rates compare as speed-ups.
void BM_conv2d_winograd_prepacked(benchmark::State& state, kern::conv2d_geometry g) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const std::int64_t out_plane = g.out_h() * g.out_w();
  const auto input = random_floats(g.n * g.c * g.h * g.w, 1);
  const auto weight = random_floats(g.k * g.c * g.r * g.s, 2);
  const auto bias = random_floats(g.k, 3);
  const kern::aligned_floats filters = kern::conv2d_winograd_filters(g, weight.data());
  std::vector<float> out(static_cast<std::size_t>(g.n * g.k * out_plane));
  for (auto _ : state) {
    kern::conv2d_winograd(g, input.data(), filters.data(), bias.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  tracemod::bench::report_flops(state, 2.0 * static_cast<double>(g.n * g.k * out_plane * g.c * 9), state.range(0));
}

// The Winograd filter transform alone (what a call with per-call filters adds to a prepacked one),
// into a buffer allocated once. Counter: floats of transformed filters written per second.
void BM_winograd_filter_transform(benchmark::State& state, std::int64_t channels) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const auto weight = random_floats(channels * channels * 9, 2);
  kern::aligned_floats filters(static_cast<std::size_t>(kern::detail::winograd_filters_size(channels, channels)));
  for (auto _ : state) {
    kern::detail::winograd_transform_filters(channels, channels, weight.data(), filters.data());
    benchmark::DoNotOptimize(filters.data());
    benchmark::ClobberMemory();
  }
  state.counters["floats_per_s"] =
      benchmark::Counter(static_cast<double>(filters.size()), benchmark::Counter::kIsIterationInvariantRate);
}

// Depthwise convolution is memory-bound: bytes = input read once + output written once (weights
// and bias are negligible), reported against the triad bandwidth (one core's, at any thread count).
void BM_conv2d_depthwise(benchmark::State& state, kern::conv2d_geometry g) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const std::int64_t out_plane = g.out_h() * g.out_w();
  const auto input = random_floats(g.n * g.c * g.h * g.w, 1);
  const auto weight = random_floats(g.k * g.r * g.s, 2);
  const auto bias = random_floats(g.k, 3);
  std::vector<float> out(static_cast<std::size_t>(g.n * g.k * out_plane));
  for (auto _ : state) {
    kern::conv2d(g, input.data(), weight.data(), bias.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  tracemod::bench::report_bytes(state, 4.0 * static_cast<double>(g.n * (g.c * g.h * g.w + g.k * out_plane)));
  tracemod::bench::report_flops(state, 2.0 * static_cast<double>(g.n * g.k * out_plane * g.r * g.s));
}

constexpr kern::conv2d_geometry depthwise_3x3(std::int64_t channels, std::int64_t size, std::int64_t stride) {
  return {1, channels, size, size, channels, 3, 3, stride, stride, 1, 1, 1, 1, channels};
}

// {n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w}
constexpr kern::conv2d_geometry resnet_3x3(std::int64_t channels, std::int64_t size) {
  return {1, channels, size, size, channels, 3, 3, 1, 1, 1, 1};
}

}  // namespace

// Each ResNet-18 3x3 stride-1 layer three ways: the im2col GEMM (direct), Winograd transforming
// the filters on every call, Winograd with prepacked filters.
#define TRACEMOD_BENCH_RESNET_3X3(C, S)                                                                  \
  BENCHMARK_CAPTURE(BM_conv2d, resnet18_3x3_##C##_##S##x##S##_direct, resnet_3x3(C, S),                 \
                    kern::conv2d_algorithm::direct)                                                      \
      ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)                                                                    \
      ->MinTime(tracemod::bench::min_time(0.3));                                                                                    \
  BENCHMARK_CAPTURE(BM_conv2d, resnet18_3x3_##C##_##S##x##S##_winograd, resnet_3x3(C, S),               \
                    kern::conv2d_algorithm::winograd)                                                    \
      ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)                                                                    \
      ->MinTime(tracemod::bench::min_time(0.3));                                                                                    \
  BENCHMARK_CAPTURE(BM_conv2d_winograd_prepacked, resnet18_3x3_##C##_##S##x##S##_winograd_prepacked,    \
                    resnet_3x3(C, S))                                                                    \
      ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)                                                                    \
      ->MinTime(tracemod::bench::min_time(0.3))
TRACEMOD_BENCH_RESNET_3X3(64, 56);
TRACEMOD_BENCH_RESNET_3X3(128, 28);
TRACEMOD_BENCH_RESNET_3X3(256, 14);
TRACEMOD_BENCH_RESNET_3X3(512, 7);
#define TRACEMOD_BENCH_FILTER_TRANSFORM(C)                                                       \
  BENCHMARK_CAPTURE(BM_winograd_filter_transform, resnet18_3x3_##C, std::int64_t{C})              \
      ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3))
TRACEMOD_BENCH_FILTER_TRANSFORM(64);
TRACEMOD_BENCH_FILTER_TRANSFORM(128);
TRACEMOD_BENCH_FILTER_TRANSFORM(256);
TRACEMOD_BENCH_FILTER_TRANSFORM(512);
// The batch-8 shapes: more tiles per filter transform.
BENCHMARK_CAPTURE(BM_conv2d, resnet18_3x3_512_7x7_batch8_direct,
                  kern::conv2d_geometry{8, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1}, kern::conv2d_algorithm::direct)
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_conv2d, resnet18_3x3_512_7x7_batch8_winograd,
                  kern::conv2d_geometry{8, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1}, kern::conv2d_algorithm::winograd)
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_conv2d_winograd_prepacked, resnet18_3x3_512_7x7_batch8_winograd_prepacked,
                  kern::conv2d_geometry{8, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
// MobileNetV2's depthwise layers (batch 1), every distinct shape: planes up to 56x56 run
// channel-blocked, the 112x112 ones row by row on de-interleaved copies.
#define TRACEMOD_BENCH_DEPTHWISE(C, S, STRIDE)                                                                     \
  BENCHMARK_CAPTURE(BM_conv2d_depthwise, mobilenet_dw_3x3s##STRIDE##_##C##_##S##x##S, depthwise_3x3(C, S, STRIDE)) \
      ->Unit(benchmark::kMicrosecond)                                                                              \
      ->Apply(tracemod::bench::over_threads)                                                                       \
      ->MinTime(tracemod::bench::min_time(0.3))
TRACEMOD_BENCH_DEPTHWISE(32, 112, 1);
TRACEMOD_BENCH_DEPTHWISE(96, 112, 2);
TRACEMOD_BENCH_DEPTHWISE(144, 56, 1);
TRACEMOD_BENCH_DEPTHWISE(144, 56, 2);
TRACEMOD_BENCH_DEPTHWISE(192, 28, 1);
TRACEMOD_BENCH_DEPTHWISE(192, 28, 2);
TRACEMOD_BENCH_DEPTHWISE(384, 14, 1);
TRACEMOD_BENCH_DEPTHWISE(576, 14, 1);
TRACEMOD_BENCH_DEPTHWISE(576, 14, 2);
TRACEMOD_BENCH_DEPTHWISE(960, 7, 1);
// MobileNetV2's 1x1 convolutions at small spatial sizes (batch 1).
BENCHMARK_CAPTURE(BM_conv2d, mobilenet_1x1_64_384_14x14, kern::conv2d_geometry{1, 64, 14, 14, 384, 1, 1})
    ->Unit(benchmark::kMicrosecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_conv2d, mobilenet_1x1_384_64_14x14, kern::conv2d_geometry{1, 384, 14, 14, 64, 1, 1})
    ->Unit(benchmark::kMicrosecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_conv2d, mobilenet_1x1_160_960_7x7, kern::conv2d_geometry{1, 160, 7, 7, 960, 1, 1})
    ->Unit(benchmark::kMicrosecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_conv2d, mobilenet_1x1_960_160_7x7, kern::conv2d_geometry{1, 960, 7, 7, 160, 1, 1})
    ->Unit(benchmark::kMicrosecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_conv2d, mobilenet_1x1_320_1280_7x7, kern::conv2d_geometry{1, 320, 7, 7, 1280, 1, 1})
    ->Unit(benchmark::kMicrosecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_conv2d, resnet18_stem_7x7s2_3_224x224,
                  kern::conv2d_geometry{1, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_conv2d, resnet18_1x1s2_64_128_56x56, kern::conv2d_geometry{1, 64, 56, 56, 128, 1, 1, 2, 2})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_conv2d, depthwise_3x3_256_28x28,
                  kern::conv2d_geometry{1, 256, 28, 28, 256, 3, 3, 1, 1, 1, 1, 1, 1, 256})
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));

}  // namespace tmod_bench_conv2d
