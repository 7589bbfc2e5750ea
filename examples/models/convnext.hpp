// ConvNeXt with torchvision's topology and parameter names, so a torchvision state_dict loads 1:1
// (features.0.0 stem conv, features.0.1 LayerNorm2d, features.{1,3,5,7}.<i> CNBlocks with
// layer_scale and block.0 / block.2 / block.3 / block.5, features.{2,4,6} downsampling
// (LayerNorm2d, 2x2 stride-2 conv), classifier.0 LayerNorm2d and classifier.2 Linear).
// `dims` and `depths` set the four stages' widths and block counts: the defaults are
// torchvision.models.convnext_tiny's (96/192/384/768, 3/3/9/3).
//
// Stochastic depth is the identity at inference and has no state, so the blocks leave it out: a
// ConvNeXt runs in eval mode as torchvision's does, and trains without stochastic depth.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/factories.hpp>
#include <tracemod/functional/layer_norm.hpp>
#include <tracemod/functional/shape_ops.hpp>
#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/flatten.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/module_list.hpp>
#include <tracemod/nn/norm_layers.hpp>
#include <tracemod/nn/pooling.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/nn/sequential.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace models {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

/// torchvision's LayerNorm2d: LayerNorm over the channels of an (N, C, H, W) tensor (permuted to
/// channels-last and back), state_dict keys `weight` and `bias` of shape (C,).
struct LayerNorm2d : tmod::Module {
  std::int64_t channels = 0;
  double eps = 1e-6;
  tmod::Parameter weight;
  tmod::Parameter bias;

  explicit LayerNorm2d(std::int64_t c, double epsilon = 1e-6)
      : channels(c), eps(epsilon), weight(tmod::ones({c})), bias(tmod::zeros({c})) {}

  TM_MODULE(LayerNorm2d, weight, bias)

  auto forward(const auto& x) const {
    auto last = F::transpose(x, F::int_list{0, 2, 3, 1});
    auto normed = F::layer_norm(last, F::int_list{channels}, weight, bias, eps);
    return F::transpose(normed, F::int_list{0, 3, 1, 2});
  }
};

/// torchvision's Permute: the axes of its input in the order `dims`.
struct Permute : tmod::Module {
  F::int_list dims;

  explicit Permute(F::int_list d) : dims(std::move(d)) {}

  TM_MODULE(Permute)

  auto forward(const auto& x) const { return F::transpose(x, dims); }
};

/// torchvision's CNBlock: 7x7 depthwise conv, channels-last LayerNorm, Linear to 4 * dim, GELU,
/// Linear back, scaled per channel by layer_scale (dim, 1, 1), plus the input.
struct CNBlock : tmod::Module {
  using Block = M::Sequential<M::Conv2d, Permute, M::LayerNorm, M::Linear, M::GELU, M::Linear, Permute>;

  tmod::Parameter layer_scale;
  Block block;

  explicit CNBlock(std::int64_t dim, double layer_scale_init = 1e-6)
      : layer_scale(tmod::full({dim, 1, 1}, layer_scale_init)),
        block(M::Conv2d(dim, dim, 7, {.padding = 3, .groups = dim}), Permute({0, 2, 3, 1}), M::LayerNorm({dim}, 1e-6),
              M::Linear(dim, 4 * dim), M::GELU(), M::Linear(4 * dim, dim), Permute({0, 3, 1, 2})) {}

  TM_MODULE(CNBlock, layer_scale, block)

  auto forward(const auto& x) const {
    auto y = block(x);
    auto scaled = y * layer_scale;
    return scaled + x;
  }
};

using ConvNeXtStem = M::Sequential<M::Conv2d, LayerNorm2d>;       ///< features.0: 4x4 stride-4 conv, LayerNorm2d
using ConvNeXtStage = M::ModuleList<CNBlock>;                     ///< features.1, 3, 5, 7
using ConvNeXtDownsample = M::Sequential<LayerNorm2d, M::Conv2d>;  ///< features.2, 4, 6: LayerNorm2d, 2x2 stride-2 conv
using ConvNeXtFeatures = M::ModuleList<ConvNeXtStem, ConvNeXtStage, ConvNeXtDownsample>;

/// The keyword arguments of torchvision's ConvNeXt for a four-stage network.
struct ConvNeXtOptions {
  std::array<std::int64_t, 4> dims{96, 192, 384, 768};
  std::array<std::int64_t, 4> depths{3, 3, 9, 3};
  std::int64_t num_classes = 1000;
  double layer_scale = 1e-6;  ///< the initial value of every block's layer_scale
};

/// torchvision.models.ConvNeXt with four stages: features (stem, stage, downsampling, ..., stage),
/// global average pooling, classifier (LayerNorm2d, Flatten, Linear).
struct ConvNeXt : tmod::Module {
  ConvNeXtOptions options;
  ConvNeXtFeatures features;
  M::AdaptiveAvgPool2d avgpool;
  M::Sequential<LayerNorm2d, M::Flatten, M::Linear> classifier;

  explicit ConvNeXt(ConvNeXtOptions o = {})
      : options(checked(o)),
        features(make_features(options)),
        avgpool(1),
        classifier(LayerNorm2d(o.dims[3]), M::Flatten(1), M::Linear(o.dims[3], o.num_classes)) {}

  TM_MODULE(ConvNeXt, features, avgpool, classifier)

  template <class X>
  auto forward(const X& x) const {
    using Out = std::remove_cvref_t<decltype(std::declval<const ConvNeXtStem&>()(x))>;
    Out y = features[0].template get<ConvNeXtStem>()(x);
    for (std::size_t i = 1; i < features.size(); ++i) {
      if (i % 2 == 1) {
        for (const CNBlock& b : features[i].template get<ConvNeXtStage>()) y = b(y);
      } else {
        y = features[i].template get<ConvNeXtDownsample>()(y);
      }
    }
    auto pooled = avgpool(y);
    return classifier(pooled);
  }

 private:
  static ConvNeXtOptions checked(const ConvNeXtOptions& o) {
    for (std::size_t i = 0; i < 4; ++i)
      if (o.dims[i] <= 0 || o.depths[i] < 0)
        throw tmod::value_error("ConvNeXt: stage " + std::to_string(i) + " has dim " + std::to_string(o.dims[i]) +
                                " and depth " + std::to_string(o.depths[i]) +
                                "; dims must be positive and depths non-negative");
    if (o.num_classes <= 0)
      throw tmod::value_error("ConvNeXt: num_classes " + std::to_string(o.num_classes) + " must be positive");
    return o;
  }

  static ConvNeXtFeatures make_features(const ConvNeXtOptions& o) {
    ConvNeXtFeatures f;
    f.append(ConvNeXtStem(M::Conv2d(3, o.dims[0], 4, {.stride = 4}), LayerNorm2d(o.dims[0])));
    for (std::size_t i = 0; i < 4; ++i) {
      ConvNeXtStage stage;
      for (std::int64_t b = 0; b < o.depths[i]; ++b) stage.append(CNBlock(o.dims[i], o.layer_scale));
      f.append(std::move(stage));
      if (i < 3) f.append(ConvNeXtDownsample(LayerNorm2d(o.dims[i]), M::Conv2d(o.dims[i], o.dims[i + 1], 2, {.stride = 2})));
    }
    return f;
  }
};

/// torchvision.models.convnext_tiny's architecture: dims 96/192/384/768, depths 3/3/9/3.
inline ConvNeXt convnext_tiny(std::int64_t num_classes = 1000) { return ConvNeXt({.num_classes = num_classes}); }

}  // namespace models
