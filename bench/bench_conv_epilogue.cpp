// The conv epilogue (kernels::conv2d_bias_activation) against the same work as separate kernels:
// conv2d with bias, then the elementwise add of the residual, then relu, on ResNet-18's layer shapes
// (batch 1, one thread). `separate` writes the conv output and reads it back twice; `fused` applies
// add and relu while each tile is stored.
//
// BM_conv_bn_relu: M::ConvBnRelu2d in eval mode on the same layers. `separate` is three separate
// calls (conv, batch norm, relu); `module` is its forward, which chooses a strategy; `fold` and
// `bn_pass` are its two strategies forced (batch norm folded into the weights on every call, or a
// batch norm + relu pass over the conv's output), which place the switch between them.
#include "smoke.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/kernels/batch_norm.hpp>
#include <tracemod/kernels/conv2d.hpp>
#include <tracemod/kernels/elementwise.hpp>
#include <tracemod/nn/fused.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

namespace tmod_bench_conv_epilogue {

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

enum class conv_bn_mode { separate, module, fold, bn_pass };

void BM_conv_bn_relu(benchmark::State& state, std::int64_t channels, std::int64_t size, std::int64_t kernel,
                     conv_bn_mode mode) {
  namespace M = tracemod::nn;
  const int before = tracemod::get_num_threads();
  tracemod::set_num_threads(1);
  M::ConvBnRelu2d m(channels, channels, kernel, {.padding = kernel / 2, .bias = false});
  m.bn.running_mean = tracemod::randn({channels}, 1);
  m.bn.running_var = tracemod::uniform({channels}, 0.5f, 2.f, 2);
  m.bn.weight = tracemod::uniform({channels}, 0.5f, 1.5f, 3);
  m.bn.bias = tracemod::randn({channels}, 4);
  m.eval();
  const tracemod::Tensor x = tracemod::randn({1, channels, size, size}, 5);
  const auto stats = M::detail::inference_stats(m.conv, m.bn);
  const std::int64_t conv_size = kernel;  // stride 1, "same" padding
  const kern::conv2d_geometry g{1, channels, size, size, channels, conv_size, conv_size, 1, 1, kernel / 2, kernel / 2};
  tracemod::Tensor y = tracemod::Tensor::empty({1, channels, size, size});
  for (auto _ : state) {
    switch (mode) {
      case conv_bn_mode::separate: y = tracemod::functional::relu(m.bn(m.conv(x))); break;
      case conv_bn_mode::module: y = m(x); break;
      case conv_bn_mode::fold: {
        const auto [w, b] = tracemod::functional::fold_conv_bn(m.conv.weight, m.conv.bias, *stats);
        kern::conv2d_bias_activation(g, x.data<float>(), w.data<float>(), {b.data<float>(), nullptr, kern::activation::relu},
                                     y.data<float>());
        break;
      }
      case conv_bn_mode::bn_pass: {
        float* out = y.data<float>();
        kern::conv2d_bias_activation(g, x.data<float>(), m.conv.weight.data<float>(), {}, out);
        kern::batch_norm_inference(out, out, 1, static_cast<std::size_t>(channels), static_cast<std::size_t>(size * size),
                                   m.bn.running_mean.data<float>(), m.bn.running_var.data<float>(),
                                   m.bn.weight.data<float>(), m.bn.bias.data<float>(), static_cast<float>(m.bn.eps),
                                   kern::activation::relu);
        break;
      }
    }
    benchmark::DoNotOptimize(y.data<float>());
    benchmark::ClobberMemory();
  }
  state.counters["weights_per_output"] = static_cast<double>(m.conv.weight.numel()) / static_cast<double>(channels * size * size);
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
      ->MinTime(tracemod::bench::min_time(0.3));                                                                                          \
  BENCHMARK_CAPTURE(BM_conv_epilogue, resnet18_3x3_##C##_##S##x##S##_add_relu_fused, resnet_3x3(C, S), true,    \
                    true)                                                                                      \
      ->Unit(benchmark::kMicrosecond)                                                                          \
      ->MinTime(tracemod::bench::min_time(0.3))
TRACEMOD_BENCH_EPILOGUE(64, 56);
TRACEMOD_BENCH_EPILOGUE(128, 28);
TRACEMOD_BENCH_EPILOGUE(256, 14);
TRACEMOD_BENCH_EPILOGUE(512, 7);
// The stem (7x7 stride 2) and the first conv of a block: conv + bias + relu, no residual.
BENCHMARK_CAPTURE(BM_conv_epilogue, resnet18_stem_relu_separate, kern::conv2d_geometry{1, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3},
                  false, false)
    ->Unit(benchmark::kMicrosecond)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_conv_epilogue, resnet18_stem_relu_fused, kern::conv2d_geometry{1, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3},
                  true, false)
    ->Unit(benchmark::kMicrosecond)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_conv_epilogue, resnet18_3x3s2_64_128_56x56_relu_separate,
                  kern::conv2d_geometry{1, 64, 56, 56, 128, 3, 3, 2, 2, 1, 1}, false, false)
    ->Unit(benchmark::kMicrosecond)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_conv_epilogue, resnet18_3x3s2_64_128_56x56_relu_fused,
                  kern::conv2d_geometry{1, 64, 56, 56, 128, 3, 3, 2, 2, 1, 1}, true, false)
    ->Unit(benchmark::kMicrosecond)->MinTime(tracemod::bench::min_time(0.3));

// ConvBnRelu2d (eval) on ResNet-18's 3x3 layers and 1x1 convs of the same widths.
#define TRACEMOD_BENCH_CONV_BN(C, S, K)                                                                              \
  BENCHMARK_CAPTURE(BM_conv_bn_relu, convbnrelu_##K##x##K##_##C##_##S##x##S##_separate, C, S, K, conv_bn_mode::separate) \
      ->Unit(benchmark::kMicrosecond)                                                                                \
      ->MinTime(tracemod::bench::min_time(0.3));                                                                                                \
  BENCHMARK_CAPTURE(BM_conv_bn_relu, convbnrelu_##K##x##K##_##C##_##S##x##S##_module, C, S, K, conv_bn_mode::module)     \
      ->Unit(benchmark::kMicrosecond)                                                                                \
      ->MinTime(tracemod::bench::min_time(0.3));                                                                                                \
  BENCHMARK_CAPTURE(BM_conv_bn_relu, convbnrelu_##K##x##K##_##C##_##S##x##S##_fold, C, S, K, conv_bn_mode::fold)         \
      ->Unit(benchmark::kMicrosecond)                                                                                \
      ->MinTime(tracemod::bench::min_time(0.3));                                                                                                \
  BENCHMARK_CAPTURE(BM_conv_bn_relu, convbnrelu_##K##x##K##_##C##_##S##x##S##_bn_pass, C, S, K, conv_bn_mode::bn_pass)   \
      ->Unit(benchmark::kMicrosecond)                                                                                \
      ->MinTime(tracemod::bench::min_time(0.3))
TRACEMOD_BENCH_CONV_BN(64, 56, 3);
TRACEMOD_BENCH_CONV_BN(128, 28, 3);
TRACEMOD_BENCH_CONV_BN(256, 14, 3);
TRACEMOD_BENCH_CONV_BN(512, 7, 3);
TRACEMOD_BENCH_CONV_BN(64, 56, 1);
TRACEMOD_BENCH_CONV_BN(512, 7, 1);

}  // namespace tmod_bench_conv_epilogue
