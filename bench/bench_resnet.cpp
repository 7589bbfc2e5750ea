// Full-width ResNet-18, 3x224x224, eval mode, at 1 and 2 threads: the module forward (batch 1 and 8)
// next to the sum of its conv/linear kernel calls at batch 1 (each layer through F::conv2d/F::linear
// with its own weights and its own input, as in the forward: no call finds another's operands in
// cache), so the time spent outside those kernels shows.
//
//   BM_resnet18_forward/batch/threads  net(x) (counter images_per_s)
//   BM_resnet18_forward_scaling        net(x), batch 1, at 1 and 2 threads in alternation (counter
//                                      speedup: the 1-thread median over the 2-thread median)
//   BM_resnet18_conv_linear_sum        every conv/linear call of one forward, back to back
//   BM_resnet18_conv/<i>/threads       one distinct conv shape (counter: occurrences per forward)
//   BM_resnet18_conv_scaling/<i>       the same shape at 1 and 2 threads in alternation (counter
//                                      speedup: the 1-thread median over the 2-thread median)
#include "smoke.hpp"

#include <machine_limits.hpp>
#include <threads.hpp>
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/conv.hpp>
#include <tracemod/functional/linalg.hpp>

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

namespace tmod_bench_resnet {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

/// One conv call of the network: its module, input shape and how many times a forward runs it.
struct conv_call {
  const M::Conv2d* conv;
  tmod::Shape input;
  int occurrences;
};

struct resnet_fixture {
  models::ResNet net = models::resnet18();
  tmod::Tensor x = tmod::randn({1, 3, 224, 224}, 7);
  std::vector<conv_call> convs;  // distinct shapes, in order of first use
  std::vector<conv_call> calls;  // every conv layer, in forward order (occurrences 1)
  tmod::Shape fc_input;

  resnet_fixture() {
    net.eval();
    // Walk the forward with infer_shape to find each conv's input shape.
    const auto use = [&](const M::Conv2d& conv, const tmod::Shape& in) {
      calls.push_back({&conv, in, 1});
      for (conv_call& c : convs)
        if (c.input == in && c.conv->weight.shape() == conv.weight.shape() && c.conv->stride == conv.stride) {
          ++c.occurrences;
          return conv.infer_shape(in);
        }
      convs.push_back({&conv, in, 1});
      return conv.infer_shape(in);
    };
    const auto block = [&](const auto& b, const tmod::Shape& in) {
      const tmod::Shape mid = use(b.conv1, in);
      const tmod::Shape out = use(b.conv2, mid);
      if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(b.downsample)>, tmod::none_t>)
        use(b.downsample.template get<0>(), in);
      return out;
    };
    const auto stage = [&](const auto& s, const tmod::Shape& in) {
      return block(s.template get<1>(), block(s.template get<0>(), in));
    };
    const tmod::Shape stem = net.maxpool.infer_shape(use(net.conv1, x.shape()));
    const tmod::Shape features = stage(net.layer4, stage(net.layer3, stage(net.layer2, stage(net.layer1, stem))));
    fc_input = tmod::Shape{1, net.avgpool.infer_shape(features)[1]};
  }

  static double conv_flops(const conv_call& c) {
    const tmod::Shape out = c.conv->infer_shape(c.input);
    const tmod::Shape& w = c.conv->weight.shape();
    return 2.0 * static_cast<double>(out.numel() * w[1] * w[2] * w[3]);
  }
};

/// What a conv benchmark's label shows: its input, weight and stride.
std::string label(const conv_call& c) {
  return "in " + c.input.to_string() + " w " + c.conv->weight.shape().to_string() + " stride " +
         std::to_string(c.conv->stride.h);
}

resnet_fixture& fixture() {
  static resnet_fixture f;
  return f;
}

void BM_resnet18_forward(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 1);
  resnet_fixture& f = fixture();
  const std::int64_t batch = state.range(0);
  tmod::Shape shape = f.x.shape();
  shape[0] = batch;
  const tmod::Tensor x = tmod::randn(shape, 7);
  double flops = 2.0 * static_cast<double>(f.net.fc.weight.numel());
  for (const conv_call& c : f.convs) flops += c.occurrences * resnet_fixture::conv_flops(c);
  for (auto _ : state) benchmark::DoNotOptimize(f.net(x));
  tracemod::bench::report_flops(state, flops * static_cast<double>(batch), state.range(1));
  state.counters["images_per_s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_resnet18_forward)
    ->ArgNames({"batch", "threads"})
    ->ArgsProduct({{1, 8}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(tracemod::bench::repetitions(5))
    ->ReportAggregatesOnly(true);

/// The forward at batch 1, at 1 and 2 threads alternated (tracemod::bench::run_scaling, blocks of 4
/// forwards): the two-thread speed-up measured as the per-layer ones are, with the machine's drift
/// reaching both counts alike (BM_resnet18_forward runs them minutes apart).
void BM_resnet18_forward_scaling(benchmark::State& state) {
  resnet_fixture& f = fixture();
  const tmod::Tensor x = tmod::randn(f.x.shape(), 7);
  tracemod::bench::run_scaling(state, [&] { benchmark::DoNotOptimize(f.net(x)); }, 4);
}
BENCHMARK(BM_resnet18_forward_scaling)
    ->MinTime(tracemod::bench::min_time(4.0))
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_resnet18_conv_linear_sum(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 0);
  resnet_fixture& f = fixture();
  std::vector<tmod::Tensor> inputs;
  double flops = 2.0 * static_cast<double>(f.net.fc.weight.numel());
  for (const conv_call& c : f.calls) {
    inputs.push_back(tmod::randn(c.input, 3 + inputs.size()));
    flops += resnet_fixture::conv_flops(c);
  }
  const tmod::Tensor fc_x = tmod::randn(f.fc_input, 5);
  for (auto _ : state) {
    for (std::size_t i = 0; i < f.calls.size(); ++i) {
      const M::Conv2d& conv = *f.calls[i].conv;
      benchmark::DoNotOptimize(F::conv2d(inputs[i], conv.weight, tmod::none, conv.conv_params()));
    }
    benchmark::DoNotOptimize(F::linear(fc_x, f.net.fc.weight, f.net.fc.bias));
  }
  tracemod::bench::report_flops(state, flops, state.range(0));
}
BENCHMARK(BM_resnet18_conv_linear_sum)
    ->Apply(tracemod::bench::over_threads)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(tracemod::bench::repetitions(5))
    ->ReportAggregatesOnly(true);

void BM_resnet18_conv(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 1);
  resnet_fixture& f = fixture();
  const conv_call& c = f.convs.at(static_cast<std::size_t>(state.range(0)));
  const tmod::Tensor in = tmod::randn(c.input, 3);
  for (auto _ : state) benchmark::DoNotOptimize(F::conv2d(in, c.conv->weight, tmod::none, c.conv->conv_params()));
  tracemod::bench::report_flops(state, resnet_fixture::conv_flops(c), state.range(1));
  state.counters["occurrences"] = c.occurrences;
  state.SetLabel(label(c));
}
// ResNet-18 has 11 distinct conv shapes.
BENCHMARK(BM_resnet18_conv)
    ->ArgNames({"conv", "threads"})
    ->ArgsProduct({benchmark::CreateDenseRange(0, 10, 1), {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

/// One conv shape at 1 and 2 threads alternated (tracemod::bench::run_scaling): the ratio of the
/// two with less of the machine's drift in it than BM_resnet18_conv's separate runs.
void BM_resnet18_conv_scaling(benchmark::State& state) {
  resnet_fixture& f = fixture();
  const conv_call& c = f.convs.at(static_cast<std::size_t>(state.range(0)));
  const tmod::Tensor in = tmod::randn(c.input, 3);
  tracemod::bench::run_scaling(state, [&] {
    benchmark::DoNotOptimize(F::conv2d(in, c.conv->weight, tmod::none, c.conv->conv_params()));
  });
  state.SetLabel(label(c));
}
BENCHMARK(BM_resnet18_conv_scaling)
    ->ArgName("conv")
    ->DenseRange(0, 10, 1)
    ->MinTime(tracemod::bench::min_time(2.0))
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

}  // namespace tmod_bench_resnet
