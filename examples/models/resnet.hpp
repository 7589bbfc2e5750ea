// ResNet-18 with torchvision's topology and parameter names, so a torchvision state_dict loads 1:1
// (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, ..., fc). `width` scales every stage
// (64 -> 64/128/256/512 as torchvision; 8 -> 8/16/32/64 for small tests).
//
// Every forward is generic and written in single-assignment style (one new name per line, no
// branching on tensor values), so the compile-time tracer can capture it.
#pragma once

#include <tracemod/functional/shape_ops.hpp>
#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/pooling.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/nn/sequential.hpp>

#include <cstdint>

namespace models {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

/// 3x3 conv, bn, relu, 3x3 conv, bn, plus the shortcut, then relu. With Downsample the shortcut is a
/// strided 1x1 conv + bn (torchvision's `downsample`); without it, the identity (`downsample = None`).
template <bool Downsample>
struct BasicBlock : tmod::Module {
  using Shortcut = std::conditional_t<Downsample, M::Sequential<M::Conv2d, M::BatchNorm2d>, tmod::none_t>;

  M::Conv2d conv1;
  M::BatchNorm2d bn1;
  M::ReLU relu;
  M::Conv2d conv2;
  M::BatchNorm2d bn2;
  Shortcut downsample;

  BasicBlock(std::int64_t inplanes, std::int64_t planes, std::int64_t stride)
      : conv1(inplanes, planes, 3, {.stride = stride, .padding = 1, .bias = false}),
        bn1(planes),
        conv2(planes, planes, 3, {.padding = 1, .bias = false}),
        bn2(planes),
        downsample(make_shortcut(inplanes, planes, stride)) {}

  TM_MODULE(BasicBlock, conv1, bn1, relu, conv2, bn2, downsample)

  auto forward(const auto& x) const {
    auto out1 = conv1(x);
    auto out2 = bn1(out1);
    auto out3 = relu(out2);
    auto out4 = conv2(out3);
    auto out5 = bn2(out4);
    auto identity = shortcut(x);
    auto sum = out5 + identity;
    return relu(sum);
  }

 private:
  static Shortcut make_shortcut(std::int64_t inplanes, std::int64_t planes, std::int64_t stride) {
    if constexpr (Downsample)
      return Shortcut(M::Conv2d(inplanes, planes, 1, {.stride = stride, .bias = false}), M::BatchNorm2d(planes));
    else
      return tmod::none;
  }

  auto shortcut(const auto& x) const {
    if constexpr (Downsample)
      return downsample(x);
    else
      return x;
  }
};

/// A stage: the first block may change width and stride; the second keeps them.
template <bool Downsample>
using Stage = M::Sequential<BasicBlock<Downsample>, BasicBlock<false>>;

template <bool Downsample>
Stage<Downsample> make_stage(std::int64_t inplanes, std::int64_t planes, std::int64_t stride) {
  return Stage<Downsample>(BasicBlock<Downsample>(inplanes, planes, stride), BasicBlock<false>(planes, planes, 1));
}

/// ResNet-18 (torchvision.models.resnet18): layers [2, 2, 2, 2] of BasicBlock.
struct ResNet : tmod::Module {
  M::Conv2d conv1;
  M::BatchNorm2d bn1;
  M::ReLU relu;
  M::MaxPool2d maxpool;
  Stage<false> layer1;
  Stage<true> layer2;
  Stage<true> layer3;
  Stage<true> layer4;
  M::AdaptiveAvgPool2d avgpool;
  M::Linear fc;

  explicit ResNet(std::int64_t num_classes = 1000, std::int64_t width = 64)
      : conv1(3, width, 7, {.stride = 2, .padding = 3, .bias = false}),
        bn1(width),
        maxpool(3, {.stride = 2, .padding = 1}),
        layer1(make_stage<false>(width, width, 1)),
        layer2(make_stage<true>(width, 2 * width, 2)),
        layer3(make_stage<true>(2 * width, 4 * width, 2)),
        layer4(make_stage<true>(4 * width, 8 * width, 2)),
        avgpool(1),
        fc(8 * width, num_classes) {}

  TM_MODULE(ResNet, conv1, bn1, relu, maxpool, layer1, layer2, layer3, layer4, avgpool, fc)

  auto forward(const auto& x) const {
    auto c1 = conv1(x);
    auto b1 = bn1(c1);
    auto r1 = relu(b1);
    auto p1 = maxpool(r1);
    auto l1 = layer1(p1);
    auto l2 = layer2(l1);
    auto l3 = layer3(l2);
    auto l4 = layer4(l3);
    auto pooled = avgpool(l4);
    auto flat = F::flatten(pooled, {.start_axis = 1});
    return fc(flat);
  }
};

/// torchvision.models.resnet18(num_classes=...), with an optional narrower base width.
inline ResNet resnet18(std::int64_t num_classes = 1000, std::int64_t width = 64) { return ResNet(num_classes, width); }

}  // namespace models
