// Fused modules holding a conv and a bn (MegEngine's ConvBn2d / ConvBnRelu2d): one module the
// quantization and fusion passes treat as a unit; state_dict keys conv.* and bn.*.
#pragma once

#include <tracemod/functional/elementwise.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/reflection.hpp>

#include <cstdint>

namespace tracemod::nn {

/// bn(conv(x))
class ConvBn2d : public Module {
 public:
  Conv2d conv;
  BatchNorm2d bn;

  ConvBn2d(std::int64_t in, std::int64_t out, functional::pair2 kernel, const Conv2dOptions& conv_options = {},
           const BatchNorm2dOptions& bn_options = {})
      : conv(in, out, kernel, conv_options), bn(out, bn_options) {}

  TM_BUILTIN_MODULE(ConvBn2d, conv, bn)

  [[nodiscard]] Tensor forward(const Tensor& x) const { return bn(conv(x)); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return bn.infer_shape(conv.infer_shape(x)); }
};

/// relu(bn(conv(x)))
class ConvBnRelu2d : public Module {
 public:
  Conv2d conv;
  BatchNorm2d bn;

  ConvBnRelu2d(std::int64_t in, std::int64_t out, functional::pair2 kernel, const Conv2dOptions& conv_options = {},
               const BatchNorm2dOptions& bn_options = {})
      : conv(in, out, kernel, conv_options), bn(out, bn_options) {}

  TM_BUILTIN_MODULE(ConvBnRelu2d, conv, bn)

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::relu(bn(conv(x))); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return bn.infer_shape(conv.infer_shape(x)); }
};

}  // namespace tracemod::nn
