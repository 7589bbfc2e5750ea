// The conv epilogue (kernels::conv2d_bias_activation) against the same work as separate kernels:
// conv2d with bias, then the elementwise add of the residual, then relu, on ResNet-18's layer shapes
// (batch 1, one thread). `separate` writes the conv output and reads it back twice; `fused` applies
// add and relu while each tile is stored.
#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/conv2d.hpp>
#include <tracemod/kernels/elementwise.hpp>

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

void BM_conv_epilogue(benchmark::State& state, kern::conv2d_geometry g, bool fused, bool residual) {
  const int before = tracemod::get_num_threads();
  tracemod::set_num_threads(1);
  const std::int64_t n = g.n * g.k * g.out_h() * g.out_w();
  const auto input = random_floats(g.n * g.c * g.h * g.w, 1);
  const auto weight = random_floats(g.k * (g.c / g.groups) * g.r * g.s, 2);
  const auto bias = random_floats(g.k, 3);
  const auto z = random_floats(n, 4);
  std::vector<float> out(static_cast<std::size_t>(n));
  for (auto _ : state) {
    if (fused) {
      kern::conv2d_bias_activation(g, input.data(), weight.data(),
                                   {bias.data(), residual ? z.data() : nullptr, kern::activation::relu}, out.data());
    } else {
      kern::conv2d(g, input.data(), weight.data(), bias.data(), out.data());
      if (residual) kern::binary(kern::add_op{}, out.data(), z.data(), out.data(), n);
      kern::unary(kern::relu_op{}, out.data(), out.data(), n);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  tracemod::set_num_threads(before);
}

// {n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w}
constexpr kern::conv2d_geometry resnet_3x3(std::int64_t channels, std::int64_t size) {
  return {1, channels, size, size, channels, 3, 3, 1, 1, 1, 1};
}

}  // namespace

// The second conv of each ResNet-18 basic block: conv + bias + residual add + relu.
#define TRACEMOD_BENCH_EPILOGUE(C, S)                                                                          \
  BENCHMARK_CAPTURE(BM_conv_epilogue, resnet18_3x3_##C##_##S##x##S##_add_relu_separate, resnet_3x3(C, S), false, \
                    true)                                                                                      \
      ->Unit(benchmark::kMicrosecond)                                                                          \
      ->MinTime(0.3);                                                                                          \
  BENCHMARK_CAPTURE(BM_conv_epilogue, resnet18_3x3_##C##_##S##x##S##_add_relu_fused, resnet_3x3(C, S), true,    \
                    true)                                                                                      \
      ->Unit(benchmark::kMicrosecond)                                                                          \
      ->MinTime(0.3)
TRACEMOD_BENCH_EPILOGUE(64, 56);
TRACEMOD_BENCH_EPILOGUE(128, 28);
TRACEMOD_BENCH_EPILOGUE(256, 14);
TRACEMOD_BENCH_EPILOGUE(512, 7);
// The stem (7x7 stride 2) and the first conv of a block: conv + bias + relu, no residual.
BENCHMARK_CAPTURE(BM_conv_epilogue, resnet18_stem_relu_separate, kern::conv2d_geometry{1, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3},
                  false, false)
    ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
BENCHMARK_CAPTURE(BM_conv_epilogue, resnet18_stem_relu_fused, kern::conv2d_geometry{1, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3},
                  true, false)
    ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
BENCHMARK_CAPTURE(BM_conv_epilogue, resnet18_3x3s2_64_128_56x56_relu_separate,
                  kern::conv2d_geometry{1, 64, 56, 56, 128, 3, 3, 2, 2, 1, 1}, false, false)
    ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
BENCHMARK_CAPTURE(BM_conv_epilogue, resnet18_3x3s2_64_128_56x56_relu_fused,
                  kern::conv2d_geometry{1, 64, 56, 56, 128, 3, 3, 2, 2, 1, 1}, true, false)
    ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
