// ResNet-18 (full width, 3x224x224, batch 1, one thread, eval): the module's eager forward next to
// the same network written by hand with F::conv_bias_activation, each conv's batch norm folded into
// its weight and bias once (what FuseConvBn followed by FuseConvEpilogue would produce), so every
// conv + bn (+ residual add) + relu is one kernel call. The hand-built forward is checked against
// the module (1e-4 relative) before timing.
#include "smoke.hpp"

#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/functional.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

namespace tmod_bench_resnet_epilogue {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

/// A conv with its batch norm folded in: w' = w * s, b' = beta - mean * s, s = gamma / sqrt(var + eps).
struct folded_conv {
  tmod::Tensor weight, bias;
  F::pair2 stride, padding;

  folded_conv(const M::Conv2d& conv, const M::BatchNorm2d& bn) : stride(conv.stride), padding(conv.padding) {
    weight = conv.weight.clone();
    bias = tmod::Tensor::empty({conv.out_channels}, tmod::DType::float32, "fold");
    const std::int64_t k = conv.out_channels, per = conv.weight.numel() / k;
    for (std::int64_t o = 0; o < k; ++o) {
      const double s = bn.weight.data<float>()[o] / std::sqrt(double{bn.running_var.data<float>()[o]} + bn.eps);
      for (std::int64_t i = 0; i < per; ++i) weight.data<float>()[o * per + i] *= static_cast<float>(s);
      bias.data<float>()[o] = static_cast<float>(bn.bias.data<float>()[o] - bn.running_mean.data<float>()[o] * s);
    }
  }

  template <class Z>
  tmod::Tensor operator()(const tmod::Tensor& x, const Z& z, const char* mode) const {
    return F::conv_bias_activation(x, weight, bias, z, stride, padding, 1, 1, mode);
  }
};

struct folded_block {
  folded_conv conv1, conv2;
  std::vector<folded_conv> downsample;  // empty: identity shortcut

  template <bool D>
  explicit folded_block(const models::BasicBlock<D>& b) : conv1(b.conv1, b.bn1), conv2(b.conv2, b.bn2) {
    if constexpr (D) downsample.emplace_back(b.downsample.template get<0>(), b.downsample.template get<1>());
  }

  [[nodiscard]] tmod::Tensor operator()(const tmod::Tensor& x) const {
    const tmod::Tensor h = conv1(x, tmod::none, "relu");
    const tmod::Tensor shortcut = downsample.empty() ? x : downsample.front()(x, tmod::none, "identity");
    return conv2(h, shortcut, "relu");
  }
};

struct folded_resnet {
  const models::ResNet& net;
  folded_conv stem;
  std::vector<folded_block> blocks;

  explicit folded_resnet(const models::ResNet& n) : net(n), stem(n.conv1, n.bn1) {
    const auto stage = [&](const auto& s) {
      blocks.emplace_back(s.template get<0>());
      blocks.emplace_back(s.template get<1>());
    };
    stage(n.layer1);
    stage(n.layer2);
    stage(n.layer3);
    stage(n.layer4);
  }

  [[nodiscard]] tmod::Tensor operator()(const tmod::Tensor& x) const {
    tmod::Tensor h = net.maxpool(stem(x, tmod::none, "relu"));
    for (const folded_block& b : blocks) h = b(h);
    return net.fc(F::flatten(net.avgpool(h), {.start_axis = 1}));
  }
};

struct fixture {
  models::ResNet net = models::resnet18();
  tmod::Tensor x = tmod::randn({1, 3, 224, 224}, 7);
  fixture() {
    net.eval();
    // Non-trivial statistics, so the folding is exercised.
    std::uint64_t seed = 3;
    for (auto& [name, t] : net.named_tensors())
      if (name.find("bn") != std::string::npos && t.dtype() == tmod::DType::float32) {
        const tmod::Tensor r = tmod::uniform(t.shape(), 0.5f, 1.5f, seed++);
        std::copy_n(r.data<float>(), t.numel(), t.data<float>());
      }
  }
};

fixture& shared_fixture() {
  static fixture f;
  return f;
}

void BM_resnet18_eager(benchmark::State& state) {
  fixture& f = shared_fixture();
  const int before = tmod::get_num_threads();
  tmod::set_num_threads(1);
  for (auto _ : state) benchmark::DoNotOptimize(f.net(f.x));
  tmod::set_num_threads(before);
}

void BM_resnet18_conv_bias_activation(benchmark::State& state) {
  fixture& f = shared_fixture();
  const folded_resnet folded(f.net);
  const tmod::Tensor want = f.net(f.x), got = folded(f.x);
  float worst = 0.0f, scale = 0.0f;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, std::abs(want.data<float>()[i] - got.data<float>()[i]));
    scale = std::max(scale, std::abs(want.data<float>()[i]));
  }
  if (!(worst <= 1e-4f * std::max(scale, 1.0f))) {
    state.SkipWithError(("hand-built ResNet-18 differs from the module by " + std::to_string(worst)).c_str());
    return;
  }
  const int before = tmod::get_num_threads();
  tmod::set_num_threads(1);
  for (auto _ : state) benchmark::DoNotOptimize(folded(f.x));
  tmod::set_num_threads(before);
}

}  // namespace

BENCHMARK(BM_resnet18_eager)->Unit(benchmark::kMillisecond)->MinTime(tracemod::bench::min_time(1.0));
BENCHMARK(BM_resnet18_conv_bias_activation)->Unit(benchmark::kMillisecond)->MinTime(tracemod::bench::min_time(1.0));

}  // namespace tmod_bench_resnet_epilogue
