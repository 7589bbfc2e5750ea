// An inference batch norm folded into the convolution before it,
//   W' = W * gamma / sqrt(var + eps) (per output channel),  b' = beta + (b - mean) * gamma / sqrt(var + eps):
// the one implementation of the FuseConvBn pass and of the eval-mode ConvBn2d / ConvBnRelu2d modules.
#pragma once

#include <tracemod/core/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

namespace tracemod::functional {

/// Inference batch norm statistics per channel; absent ones (null) take their neutral value.
struct batch_norm_stats {
  const Tensor* mean = nullptr;
  const Tensor* var = nullptr;
  const Tensor* gamma = nullptr;
  const Tensor* beta = nullptr;
  double eps = 1e-5;
};

/// Whether every present statistic is a float32 (channels,) tensor.
inline bool stats_fit(const batch_norm_stats& bn, std::int64_t channels) {
  for (const Tensor* t : {bn.mean, bn.var, bn.gamma, bn.beta})
    if (t != nullptr && !(t->defined() && t->dtype() == DType::float32 && t->shape() == Shape{channels})) return false;
  return true;
}

/// (W', b') of a float32 conv weight [k, ...] followed by a batch norm whose statistics fit k
/// channels; `bias` (k,) may be undefined. Each product is formed in double and rounded once.
inline std::pair<Tensor, Tensor> fold_conv_bn(const Tensor& weight, const Tensor& bias, const batch_norm_stats& bn) {
  const std::int64_t out = weight.shape()[0];
  const std::int64_t per_out = weight.numel() / std::max<std::int64_t>(out, 1);
  const auto at = [](const Tensor* t, std::int64_t i, double neutral) {
    return t != nullptr ? static_cast<double>(t->data<float>()[i]) : neutral;
  };
  Tensor w = Tensor::empty(weight.shape(), DType::float32, "fold_conv_bn");
  Tensor b = Tensor::empty(Shape{out}, DType::float32, "fold_conv_bn");
  const float* src = weight.data<float>();
  float* dst = w.data<float>();
  for (std::int64_t o = 0; o < out; ++o) {
    const double scale = at(bn.gamma, o, 1.0) / std::sqrt(at(bn.var, o, 1.0) + bn.eps);
    for (std::int64_t i = 0; i < per_out; ++i)
      dst[o * per_out + i] = static_cast<float>(static_cast<double>(src[o * per_out + i]) * scale);
    const double conv_bias = bias.defined() ? static_cast<double>(bias.data<float>()[o]) : 0.0;
    b.data<float>()[o] = static_cast<float>(at(bn.beta, o, 0.0) + (conv_bias - at(bn.mean, o, 0.0)) * scale);
  }
  return {w, b};
}

}  // namespace tracemod::functional
