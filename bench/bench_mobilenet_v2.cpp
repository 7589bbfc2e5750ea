// Full-width MobileNetV2 (torchvision's structure, random weights), 3x224x224, eval mode: batch 1
// and 8, at 1 and 2 threads (tmod::set_num_threads; a build without OpenMP runs one thread
// whatever is asked, and says so in the label). Each of its 52 convolutions as the optimized network
// runs it (batch norm folded into a bias, relu6 or the shortcut add fused), at one thread, alone and
// chained: BM_mobilenet_v2_layer[_chained]/<index>, the index of bench/torch/mobilenet_v2_layers.py,
// which times libtorch's best mode the same two ways.
#include "smoke.hpp"

#include <machine_limits.hpp>
#include <models/mobilenet_v2.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/conv2d.hpp>

#include <benchmark/benchmark.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace tmod_bench_mobilenet_v2 {

namespace {

namespace tmod = tracemod;

models::MobileNetV2& mobilenet() {
  static models::MobileNetV2 net = [] {
    models::MobileNetV2 m = models::mobilenet_v2();
    m.eval();
    return m;
  }();
  return net;
}

void BM_mobilenet_v2_forward(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(1));
  const int previous = tmod::get_num_threads();
  tmod::set_num_threads(threads);
  const tmod::Tensor x = tmod::randn({state.range(0), 3, 224, 224}, 7);
  for (auto _ : state) benchmark::DoNotOptimize(mobilenet()(x));
  tmod::set_num_threads(previous);
  state.SetLabel(std::string(tmod::parallel_backend_available() ? "" : "serial build; ") + "batch " +
                 std::to_string(state.range(0)) + ", " + std::to_string(threads) + " thread(s)");
  // 300.8 MMAC per image (torchvision's figure for mobilenet_v2).
  tracemod::bench::report_flops(state, 2.0 * 300.8e6 * static_cast<double>(state.range(0)));
}
BENCHMARK(BM_mobilenet_v2_forward)
    ->ArgsProduct({{1, 8}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(tracemod::bench::min_time(0.5));

namespace kern = tracemod::kernels;

struct layer {
  kern::conv2d_geometry g;
  bool relu6, residual;  // else the folded bias only
};

// torchvision's layers in network order: the stem, per block its expansion (t > 1), depthwise and
// projection convolutions, the 1x1 head.
std::vector<layer> mobilenet_v2_layers() {
  struct block {
    std::int64_t t, c, s;
  };
  constexpr std::array<block, 17> blocks{{{1, 16, 1}, {6, 24, 2}, {6, 24, 1}, {6, 32, 2}, {6, 32, 1}, {6, 32, 1},
                                          {6, 64, 2}, {6, 64, 1}, {6, 64, 1}, {6, 64, 1}, {6, 96, 1}, {6, 96, 1},
                                          {6, 96, 1}, {6, 160, 2}, {6, 160, 1}, {6, 160, 1}, {6, 320, 1}}};
  std::vector<layer> layers{{{1, 3, 224, 224, 32, 3, 3, 2, 2, 1, 1}, true, false}};
  std::int64_t channels = 32, size = 112;
  for (const block& b : blocks) {
    const std::int64_t hidden = channels * b.t;
    if (b.t != 1) layers.push_back({{1, channels, size, size, hidden, 1, 1}, true, false});
    layers.push_back({{1, hidden, size, size, hidden, 3, 3, b.s, b.s, 1, 1, 1, 1, hidden}, true, false});
    size /= b.s;
    layers.push_back({{1, hidden, size, size, b.c, 1, 1}, false, b.s == 1 && channels == b.c});
    channels = b.c;
  }
  layers.push_back({{1, channels, size, size, 1280, 1, 1}, true, false});
  return layers;
}

// The network's convolutions with their own weights and output buffers, run in order as the
// network runs them: each on its predecessor's output, the shortcut adds on the block inputs.
class layer_chain {
 public:
  layer_chain() : input_(tmod::randn({3, 224, 224}, 1)) {
    unsigned seed = 2;
    for (const layer& l : layers_) {
      const kern::conv2d_geometry& g = l.g;
      // Scaled so activations keep their magnitude through the 52 layers.
      const double fan_in = static_cast<double>(g.c / g.groups * g.r * g.s);
      weights_.push_back(tmod::randn({g.k, g.c / g.groups, g.r, g.s}, seed++) * (1.0 / std::sqrt(fan_in)));
      biases_.push_back(tmod::randn({g.k}, seed++));
      outputs_.emplace_back(static_cast<std::size_t>(g.k * g.out_h() * g.out_w()));
    }
  }

  [[nodiscard]] std::size_t size() const { return layers_.size(); }
  [[nodiscard]] const layer& operator[](std::size_t i) const { return layers_[i]; }

  /// Runs layer i on the outputs its predecessors left.
  void run(std::size_t i) {
    const layer& l = layers_[i];
    const float* in = i == 0 ? input_.data<float>() : outputs_[i - 1].data();
    const kern::conv2d_epilogue e{biases_[i].data<float>(), l.residual ? block_input(i) : nullptr,
                                  l.relu6 ? kern::activation::relu6 : kern::activation::none};
    kern::conv2d_bias_activation(l.g, in, weights_[i].data<float>(), e, outputs_[i].data());
  }

 private:
  // A residual projection's shortcut is the block's input: the previous projection's output.
  const float* block_input(std::size_t i) const {
    for (std::size_t j = i - 1; j > 0; --j)
      if (!layers_[j].relu6) return outputs_[j].data();
    return nullptr;
  }

  std::vector<layer> layers_ = mobilenet_v2_layers();
  tmod::Tensor input_;
  std::vector<tmod::Tensor> weights_, biases_;
  std::vector<std::vector<float>> outputs_;
};

layer_chain& chain() {
  static layer_chain c;
  return c;
}

// Layer state.range(0) at one thread, alone (`chained` false: its operands stay in cache from one
// call to the next) or chained (every iteration runs all the network's convolutions and times this
// one, whose weights and output then come from memory as in the network).
void time_layer(benchmark::State& state, bool chained) {
  const auto index = static_cast<std::size_t>(state.range(0));
  const int previous = tmod::get_num_threads();
  tmod::set_num_threads(1);
  layer_chain& layers = chain();
  for (std::size_t i = 0; i < layers.size(); ++i) layers.run(i);
  for (auto _ : state) {
    if (chained) {
      state.PauseTiming();
      for (std::size_t i = 0; i < index; ++i) layers.run(i);
      state.ResumeTiming();
    }
    layers.run(index);
    if (chained) {
      state.PauseTiming();
      for (std::size_t i = index + 1; i < layers.size(); ++i) layers.run(i);
      state.ResumeTiming();
    }
    benchmark::ClobberMemory();
  }
  tmod::set_num_threads(previous);
  const layer& l = layers[index];
  const kern::conv2d_geometry& g = l.g;
  const std::int64_t out_size = g.k * g.out_h() * g.out_w();
  state.SetLabel(std::to_string(g.c) + "x" + std::to_string(g.h) + "x" + std::to_string(g.w) + " -> " +
                 std::to_string(g.k) + "x" + std::to_string(g.out_h()) + "x" + std::to_string(g.out_w()) +
                 (g.groups > 1 ? " depthwise" : "") + (l.relu6 ? " relu6" : l.residual ? " residual" : ""));
  tracemod::bench::report_flops(state, 2.0 * static_cast<double>(out_size * (g.c / g.groups) * g.r * g.s));
}
void BM_mobilenet_v2_layer(benchmark::State& state) { time_layer(state, false); }
void BM_mobilenet_v2_layer_chained(benchmark::State& state) { time_layer(state, true); }
BENCHMARK(BM_mobilenet_v2_layer)
    ->DenseRange(0, 51)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(tracemod::bench::min_time(0.1));
// A fixed count: the untimed rest of each iteration would otherwise make up most of the run.
BENCHMARK(BM_mobilenet_v2_layer_chained)
    ->DenseRange(0, 51)
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(tracemod::bench::smoke_run() ? 1 : 40);

}  // namespace

}  // namespace tmod_bench_mobilenet_v2
