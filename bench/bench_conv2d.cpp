// conv2d throughput (batch 1, resnet18 shapes) at 1 and 2 threads, against the FMA peak of the cores
// used, measured in the same run.
#include "alternated.hpp"
#include "machine_limits.hpp"
#include "smoke.hpp"
#include "threads.hpp"

#include <tracemod/kernels/conv2d.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
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
  kern::aligned_floats filters(static_cast<std::size_t>(kern::detail::winograd_filters_size(4, channels, channels)));
  for (auto _ : state) {
    kern::detail::winograd_transform_filters<4>(channels, channels, weight.data(), filters.data());
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

// Operands of one convolution for the alternated benchmarks below.
struct conv_operands {
  kern::conv2d_geometry g;
  std::vector<float> input, weight, bias, out;

  explicit conv_operands(const kern::conv2d_geometry& geometry)
      : g(geometry), input(random_floats(g.n * g.c * g.h * g.w, 1)), weight(random_floats(g.k * g.c * 9, 2)),
        bias(random_floats(g.k, 3)), out(static_cast<std::size_t>(g.n * g.k * g.out_h() * g.out_w())) {}
};

// Winograd against direct: direct convolution (the im2col GEMM) and Winograd with its filters
// transformed once (conv2d_winograd_filters, as a network's constant weights keep them), one thread,
// alternated in blocks of 16 calls (tracemod::bench::run_alternated) so that the machine's drift
// reaches both alike. Counters: medians of the timed calls (ms_direct, ms_winograd), speedup =
// ms_direct / ms_winograd, and the same from the fastest calls; the label says which F(m x m, 3x3).
void BM_winograd_over_direct(benchmark::State& state, kern::conv2d_geometry g) {
  const int before = tracemod::get_num_threads();
  tracemod::set_num_threads(1);
  conv_operands o(g);
  const kern::aligned_floats filters = kern::conv2d_winograd_filters(g, o.weight.data());
  const tracemod::bench::alternated_times t = tracemod::bench::run_alternated(
      state, 16,
      [&] {
        kern::conv2d(g, o.input.data(), o.weight.data(), o.bias.data(), o.out.data(), kern::conv2d_algorithm::direct);
        benchmark::DoNotOptimize(o.out.data());
      },
      [&] {
        kern::conv2d_winograd(g, o.input.data(), filters.data(), o.bias.data(), o.out.data());
        benchmark::DoNotOptimize(o.out.data());
      });
  tracemod::set_num_threads(before);
  state.counters["ms_direct"] = t.median_a;
  state.counters["ms_winograd"] = t.median_b;
  state.counters["speedup"] = t.median_a / t.median_b;
  state.counters["speedup_min"] = t.min_a / t.min_b;
  const std::int64_t m = kern::conv2d_winograd_tile(g);
  state.SetLabel("F(" + std::to_string(m) + "x" + std::to_string(m) + ", 3x3)");
}

// What the tile-size rule (conv2d_winograd_tile) rests on: F(4x4, 3x3) against F(2x2, 3x3), both with
// filters transformed once, one thread, alternated as above. Counters: ms_f4, ms_f2 and
// f2_speedup = ms_f4 / ms_f2 (above 1 where F(2x2) is faster).
void BM_winograd_tile_sizes(benchmark::State& state, kern::conv2d_geometry g) {
  const int before = tracemod::get_num_threads();
  tracemod::set_num_threads(1);
  conv_operands o(g);
  const auto run = [&](std::int64_t m) {
    kern::aligned_floats filters(static_cast<std::size_t>(kern::detail::winograd_filters_size(m, g.k, g.c)));
    kern::detail::winograd_transform_filters(m, g.k, g.c, o.weight.data(), filters.data());
    return [&o, m, filters = std::move(filters)] {
      const kern::conv2d_geometry& c = o.g;
      const kern::detail::winograd_tiling tl{c.n, c.h, c.w, c.pad_h, c.pad_w, c.out_h(), c.out_w(), m};
      kern::detail::conv_winograd(tl, c.c, c.k, o.input.data(), {.kept = filters.data()}, o.bias.data(),
                                  o.out.data());
      benchmark::DoNotOptimize(o.out.data());
    };
  };
  const tracemod::bench::alternated_times t = tracemod::bench::run_alternated(state, 16, run(4), run(2));
  tracemod::set_num_threads(before);
  state.counters["ms_f4"] = t.median_a;
  state.counters["ms_f2"] = t.median_b;
  state.counters["f2_speedup"] = t.median_a / t.median_b;
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
// The alternated Winograd benchmarks (BM_winograd_over_direct, BM_winograd_tile_sizes) on geometry
// {n, c, h, w, k, 3, 3, 1, 1, 1, 1}.
#define TRACEMOD_BENCH_WINOGRAD_ALTERNATED(FN, NAME, ...)                                       \
  BENCHMARK_CAPTURE(FN, NAME, kern::conv2d_geometry{__VA_ARGS__})                                  \
      ->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(tracemod::bench::min_time(1.0))
TRACEMOD_BENCH_WINOGRAD_ALTERNATED(BM_winograd_over_direct, resnet18_3x3_64_56x56, 1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1);
TRACEMOD_BENCH_WINOGRAD_ALTERNATED(BM_winograd_over_direct, resnet18_3x3_128_28x28, 1, 128, 28, 28, 128, 3, 3, 1, 1, 1, 1);
TRACEMOD_BENCH_WINOGRAD_ALTERNATED(BM_winograd_over_direct, resnet18_3x3_256_14x14, 1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1);
TRACEMOD_BENCH_WINOGRAD_ALTERNATED(BM_winograd_over_direct, resnet18_3x3_512_7x7, 1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1);
TRACEMOD_BENCH_WINOGRAD_ALTERNATED(BM_winograd_over_direct, resnet18_3x3_512_7x7_batch8, 8, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1);
TRACEMOD_BENCH_WINOGRAD_ALTERNATED(BM_winograd_tile_sizes, resnet18_3x3_512_7x7, 1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1);
TRACEMOD_BENCH_WINOGRAD_ALTERNATED(BM_winograd_tile_sizes, resnet18_3x3_512_7x7_batch2, 2, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1);
TRACEMOD_BENCH_WINOGRAD_ALTERNATED(BM_winograd_tile_sizes, resnet18_3x3_512_7x7_batch4, 4, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1);
TRACEMOD_BENCH_WINOGRAD_ALTERNATED(BM_winograd_tile_sizes, resnet18_3x3_256_14x14, 1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1);
TRACEMOD_BENCH_WINOGRAD_ALTERNATED(BM_winograd_tile_sizes, c256_7x7, 1, 256, 7, 7, 256, 3, 3, 1, 1, 1, 1);
TRACEMOD_BENCH_WINOGRAD_ALTERNATED(BM_winograd_tile_sizes, c320_7x7, 1, 320, 7, 7, 320, 3, 3, 1, 1, 1, 1);
TRACEMOD_BENCH_WINOGRAD_ALTERNATED(BM_winograd_tile_sizes, c384_7x7, 1, 384, 7, 7, 384, 3, 3, 1, 1, 1, 1);
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
