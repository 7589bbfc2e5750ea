// MobileNetV2 with torchvision's topology and parameter names, so a torchvision state_dict loads 1:1
// (features.0.0 ... features.18.1, features.N.conv.0.0 ..., classifier.1). `width_mult` and
// `round_nearest` scale the channels exactly as torchvision.models.mobilenet_v2 does.
//
// torchvision decides per block whether it adds the shortcut (stride 1 and equal channel counts);
// here that is part of the block's type, fixed by the default (width 1.0) network's pattern, so the
// constructor rejects a width whose channel counts would change it.
//
// Every forward is generic and single-assignment, so the compile-time tracer can capture it.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/pooling.hpp>
#include <tracemod/functional/shape_ops.hpp>
#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/dropout.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/pooling.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/nn/sequential.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

namespace models {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

/// torchvision's _make_divisible: v rounded to the nearest multiple of `divisor` (at least
/// `divisor`), rounded up once more if that lost over 10 %.
inline std::int64_t make_divisible(double v, std::int64_t divisor) {
  std::int64_t rounded = std::max(divisor, static_cast<std::int64_t>(v + static_cast<double>(divisor) / 2.0) /
                                               divisor * divisor);
  if (static_cast<double>(rounded) < 0.9 * v) rounded += divisor;
  return rounded;
}

/// torchvision's Conv2dNormActivation: conv (no bias, "same" padding), batch norm, relu6.
using ConvBNReLU6 = M::Sequential<M::Conv2d, M::BatchNorm2d, M::ReLU6>;

inline ConvBNReLU6 conv_bn_relu6(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride = 1,
                                 std::int64_t groups = 1) {
  return ConvBNReLU6(
      M::Conv2d(in, out, kernel, {.stride = stride, .padding = (kernel - 1) / 2, .groups = groups, .bias = false}),
      M::BatchNorm2d(out), M::ReLU6());
}

/// torchvision's InvertedResidual: [1x1 expand conv-bn-relu6 when the ratio is not 1], 3x3 depthwise
/// conv-bn-relu6, 1x1 projection conv, bn; plus the input when Residual (stride 1, same width).
template <bool Expand, bool Residual>
struct InvertedResidual : tmod::Module {
  using Layers = std::conditional_t<Expand, M::Sequential<ConvBNReLU6, ConvBNReLU6, M::Conv2d, M::BatchNorm2d>,
                                    M::Sequential<ConvBNReLU6, M::Conv2d, M::BatchNorm2d>>;

  Layers conv;

  InvertedResidual(std::int64_t inp, std::int64_t oup, std::int64_t stride, std::int64_t expand_ratio)
      : conv(make_layers(inp, oup, stride, inp * expand_ratio)) {
    if ((expand_ratio != 1) != Expand || (stride == 1 && inp == oup) != Residual)
      throw tmod::value_error("InvertedResidual(" + std::to_string(inp) + ", " + std::to_string(oup) +
                              ", stride " + std::to_string(stride) + ", expand_ratio " +
                              std::to_string(expand_ratio) + "): the block's type fixes expansion " +
                              (Expand ? "on" : "off") + " and the shortcut " + (Residual ? "on" : "off"));
  }

  TM_MODULE(InvertedResidual, conv)

  auto forward(const auto& x) const {
    auto y = conv(x);
    if constexpr (Residual)
      return y + x;
    else
      return y;
  }

 private:
  static Layers make_layers(std::int64_t inp, std::int64_t oup, std::int64_t stride, std::int64_t hidden) {
    M::Conv2d project(hidden, oup, 1, {.bias = false});
    if constexpr (Expand)
      return Layers(conv_bn_relu6(inp, hidden, 1), conv_bn_relu6(hidden, hidden, 3, stride, hidden),
                    std::move(project), M::BatchNorm2d(oup));
    else
      return Layers(conv_bn_relu6(hidden, hidden, 3, stride, hidden), std::move(project), M::BatchNorm2d(oup));
  }
};

using IRFirst = InvertedResidual<false, false>;  ///< expansion 1, new width
using IRDown = InvertedResidual<true, false>;    ///< new width or stride 2: no shortcut
using IRSame = InvertedResidual<true, true>;     ///< same width, stride 1: shortcut

using MobileNetV2Features = M::Sequential<ConvBNReLU6, IRFirst, IRDown, IRSame, IRDown, IRSame, IRSame, IRDown, IRSame,
                                          IRSame, IRSame, IRDown, IRSame, IRSame, IRDown, IRSame, IRSame, IRDown,
                                          ConvBNReLU6>;

/// torchvision.models.mobilenet_v2: features (stem, 17 inverted residual blocks, 1x1 head),
/// global average pooling, classifier (Dropout(0.2), Linear).
struct MobileNetV2 : tmod::Module {
  MobileNetV2Features features;
  M::Sequential<M::Dropout, M::Linear> classifier;

  explicit MobileNetV2(std::int64_t num_classes = 1000, double width_mult = 1.0, std::int64_t round_nearest = 8)
      : features(make_features(width_mult, round_nearest)),
        classifier(M::Dropout(0.2), M::Linear(last_channel(width_mult, round_nearest), num_classes)) {}

  TM_MODULE(MobileNetV2, features, classifier)

  auto forward(const auto& x) const {
    auto f = features(x);
    auto pooled = F::adaptive_avg_pool2d(f, 1);
    auto flat = F::flatten(pooled, {.start_axis = 1});
    return classifier(flat);
  }

 private:
  static std::int64_t last_channel(double width_mult, std::int64_t round_nearest) {
    return make_divisible(1280.0 * std::max(1.0, width_mult), round_nearest);
  }

  static MobileNetV2Features make_features(double width_mult, std::int64_t round_nearest) {
    // torchvision's inverted_residual_setting, one row per block: expansion t, channels c, stride s.
    struct block {
      std::int64_t t, c, s;
    };
    static constexpr std::array<block, 17> blocks{{{1, 16, 1},
                                                   {6, 24, 2},
                                                   {6, 24, 1},
                                                   {6, 32, 2},
                                                   {6, 32, 1},
                                                   {6, 32, 1},
                                                   {6, 64, 2},
                                                   {6, 64, 1},
                                                   {6, 64, 1},
                                                   {6, 64, 1},
                                                   {6, 96, 1},
                                                   {6, 96, 1},
                                                   {6, 96, 1},
                                                   {6, 160, 2},
                                                   {6, 160, 1},
                                                   {6, 160, 1},
                                                   {6, 320, 1}}};
    std::array<std::int64_t, 18> width{make_divisible(32.0 * width_mult, round_nearest)};
    for (std::size_t i = 0; i < blocks.size(); ++i)
      width[i + 1] = make_divisible(static_cast<double>(blocks[i].c) * width_mult, round_nearest);
    const auto ir = [&]<class Block>(std::type_identity<Block>, std::size_t i) {
      return Block(width[i], width[i + 1], blocks[i].s, blocks[i].t);
    };
    return MobileNetV2Features(
        conv_bn_relu6(3, width[0], 3, 2), ir(std::type_identity<IRFirst>{}, 0), ir(std::type_identity<IRDown>{}, 1),
        ir(std::type_identity<IRSame>{}, 2), ir(std::type_identity<IRDown>{}, 3), ir(std::type_identity<IRSame>{}, 4),
        ir(std::type_identity<IRSame>{}, 5), ir(std::type_identity<IRDown>{}, 6), ir(std::type_identity<IRSame>{}, 7),
        ir(std::type_identity<IRSame>{}, 8), ir(std::type_identity<IRSame>{}, 9), ir(std::type_identity<IRDown>{}, 10),
        ir(std::type_identity<IRSame>{}, 11), ir(std::type_identity<IRSame>{}, 12),
        ir(std::type_identity<IRDown>{}, 13), ir(std::type_identity<IRSame>{}, 14),
        ir(std::type_identity<IRSame>{}, 15), ir(std::type_identity<IRDown>{}, 16),
        conv_bn_relu6(width[17], last_channel(width_mult, round_nearest), 1));
  }
};

/// torchvision.models.mobilenet_v2(num_classes=..., width_mult=..., round_nearest=...).
inline MobileNetV2 mobilenet_v2(std::int64_t num_classes = 1000, double width_mult = 1.0,
                                std::int64_t round_nearest = 8) {
  return MobileNetV2(num_classes, width_mult, round_nearest);
}

}  // namespace models
