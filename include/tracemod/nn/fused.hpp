// Fused modules holding a conv and a bn (MegEngine's ConvBn2d / ConvBnRelu2d): one module the
// quantization and fusion passes treat as a unit; state_dict keys conv.* and bn.*. In eval mode the
// batch norm (and relu) run inside the one conv kernel call or right after it (docs/modules.md).
#pragma once

#include <tracemod/functional/conv.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/functional/fold_batch_norm.hpp>
#include <tracemod/kernels/batch_norm.hpp>
#include <tracemod/kernels/conv2d.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace tracemod::nn {

namespace detail {

/// The statistics an inference batch norm after `conv` normalises with, when the conv and the batch
/// norm are what the single-kernel path expects: bn in eval mode with running statistics, float32
/// tensors of the conv's output channel count. Otherwise nothing, and the modules run conv, bn (and
/// relu) as separate calls, which report whatever is wrong the way they always have.
inline std::optional<functional::batch_norm_stats> inference_stats(const Conv2d& conv, const BatchNorm2d& bn) {
  if (bn.training() || !bn.running_mean.defined() || !bn.running_var.defined() || !(bn.eps >= 0)) return std::nullopt;
  const Tensor& w = conv.weight;
  if (!w.defined() || w.dtype() != DType::float32 || w.shape().rank() != 4) return std::nullopt;
  const std::int64_t k = w.shape()[0];
  if (bn.num_features != k) return std::nullopt;
  if (conv.bias.defined() && !(conv.bias.dtype() == DType::float32 && conv.bias.shape() == Shape{k}))
    return std::nullopt;
  if (bn.weight.defined() && !bn.bias.defined()) return std::nullopt;
  // BatchNorm2d passes its affine parameters only when it has a weight.
  const functional::batch_norm_stats stats{&bn.running_mean, &bn.running_var,
                                           bn.weight.defined() ? &bn.weight : nullptr,
                                           bn.weight.defined() ? &bn.bias : nullptr, bn.eps};
  if (!functional::stats_fit(stats, k)) return std::nullopt;
  return stats;
}

/// act(bn(conv(x))) for an inference batch norm, in one convolution kernel call
/// (kernels::conv2d_bias_activation). Folding the batch norm into the conv costs a multiply per
/// weight on every call (the weights may change between calls, and nothing tells when); a batch norm
/// over the output costs one per output value. So whichever is fewer runs (measured in
/// docs/modules.md): with no more weights than output values, the conv runs with the folded weight
/// and bias and the activation in its epilogue; otherwise the conv runs with its own bias, and the
/// batch norm and the activation follow in one pass over the output, in place, with the bits of the
/// separate calls.
inline Tensor conv_bn_inference(const Conv2d& conv, const functional::batch_norm_stats& stats, const Tensor& x,
                                kernels::activation act) {
  auto [g, y] = functional::conv2d_fn::prepare(conv.conv_params(), x, conv.weight,
                                               conv.bias.defined() ? &conv.bias : nullptr);
  if (conv.weight.numel() <= y.numel()) {
    const auto [w, b] = functional::fold_conv_bn(conv.weight, conv.bias, stats);
    kernels::conv2d_bias_activation(g, x.data<float>(), w.data<float>(), {b.data<float>(), nullptr, act},
                                    y.data<float>());
    return y;
  }
  const auto data = [](const Tensor* t) { return t != nullptr ? t->data<float>() : nullptr; };
  kernels::conv2d_bias_activation(g, x.data<float>(), conv.weight.data<float>(),
                                  {conv.bias.defined() ? conv.bias.data<float>() : nullptr}, y.data<float>());
  float* out = y.data<float>();
  kernels::batch_norm_inference(out, out, static_cast<std::size_t>(g.n), static_cast<std::size_t>(g.k),
                                static_cast<std::size_t>(g.out_h() * g.out_w()), data(stats.mean), data(stats.var),
                                data(stats.gamma), data(stats.beta), static_cast<float>(stats.eps), act);
  return y;
}

/// A fused module's config {"conv": ..., "bn": ...}, the module it describes, and its tensor shapes
/// (conv.* and bn.*): what ConvBn2d and ConvBnRelu2d declare.
template <class Fused>
Value conv_bn_config(const Fused& m) {
  return Value::dict({{"conv", m.conv.config()}, {"bn", m.bn.config()}});
}
template <class Fused>
Fused conv_bn_from_config(const Value& c) {
  Fused m(1, 1, 1);
  m.conv = Conv2d::from_config(config_entry(c, Fused::tracemod_type_name, "conv"));
  m.bn = BatchNorm2d::from_config(config_entry(c, Fused::tracemod_type_name, "bn"));
  return m;
}
template <class Fused>
tensor_shape_list conv_bn_tensor_shapes(const Fused& m) {
  tensor_shape_list v = prefixed(m.conv.tensor_shapes(), "conv.");
  for (auto& s : prefixed(m.bn.tensor_shapes(), "bn.")) v.push_back(std::move(s));
  return v;
}

/// Conv, BatchNormalization, and Relu when `relu`: the modules' own rules in a row.
inline void onnx_export_conv_bn(functional::onnx_export_context& cx, const Conv2d& conv, const BatchNorm2d& bn,
                                const std::string& path, bool relu) {
  using functional::onnx_operand;
  const std::string conv_out = cx.fresh(cx.output() + "_conv");
  functional::onnx_export_context c = cx.with(cx.sub_call({cx.input(0)}, conv_out));
  conv.onnx_export(c, path + ".conv");
  const std::string bn_out = relu ? cx.fresh(cx.output() + "_bn") : cx.output();
  functional::onnx_export_context b = cx.with(cx.sub_call({onnx_operand::tensor(conv_out, cx.output_shape())}, bn_out));
  bn.onnx_export(b, path + ".bn");
  if (!relu) return;
  functional::onnx_export_context r = cx.with(cx.sub_call({onnx_operand::tensor(bn_out, cx.output_shape())}, cx.output()));
  functional::relu_fn::onnx_export(r, {});
}

/// The cost of conv then bn, the calls the module's training-mode forward makes (its eval-mode
/// kernel folds bn into the conv's weights and bias, which costs the same up to the bias adds).
inline functional::op_cost conv_bn_cost(const Conv2d& conv, const BatchNorm2d& bn, const Shape& x) {
  return conv.cost(x) + bn.cost(conv.infer_shape(x));
}

}  // namespace detail

/// bn(conv(x))
class ConvBn2d : public Module {
 public:
  Conv2d conv;
  BatchNorm2d bn;

  ConvBn2d(std::int64_t in, std::int64_t out, functional::pair2 kernel, const Conv2dOptions& conv_options = {},
           const BatchNorm2dOptions& bn_options = {})
      : conv(in, out, kernel, conv_options), bn(out, bn_options) {}

  TM_BUILTIN_MODULE(ConvBn2d, conv, bn)
  [[nodiscard]] Value config() const { return detail::conv_bn_config(*this); }
  static ConvBn2d from_config(const Value& c) { return detail::conv_bn_from_config<ConvBn2d>(c); }
  [[nodiscard]] tensor_shape_list tensor_shapes() const { return detail::conv_bn_tensor_shapes(*this); }

  /// In eval mode one conv kernel call (detail::conv_bn_inference); in training mode conv, then bn.
  [[nodiscard]] Tensor forward(const Tensor& x) const {
    if (const auto stats = detail::inference_stats(conv, bn))
      return detail::conv_bn_inference(conv, *stats, x, kernels::activation::none);
    return bn(conv(x));
  }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return bn.infer_shape(conv.infer_shape(x)); }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return conv.infer_dims(x); }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const { return detail::conv_bn_cost(conv, bn, x); }
  void onnx_export(functional::onnx_export_context& cx, const std::string& path) const {
    detail::onnx_export_conv_bn(cx, conv, bn, path, false);
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(ConvBn2d)

/// relu(bn(conv(x)))
class ConvBnRelu2d : public Module {
 public:
  Conv2d conv;
  BatchNorm2d bn;

  ConvBnRelu2d(std::int64_t in, std::int64_t out, functional::pair2 kernel, const Conv2dOptions& conv_options = {},
               const BatchNorm2dOptions& bn_options = {})
      : conv(in, out, kernel, conv_options), bn(out, bn_options) {}

  TM_BUILTIN_MODULE(ConvBnRelu2d, conv, bn)
  [[nodiscard]] Value config() const { return detail::conv_bn_config(*this); }
  static ConvBnRelu2d from_config(const Value& c) { return detail::conv_bn_from_config<ConvBnRelu2d>(c); }
  [[nodiscard]] tensor_shape_list tensor_shapes() const { return detail::conv_bn_tensor_shapes(*this); }

  /// In eval mode one conv kernel call (detail::conv_bn_inference); in training mode conv, bn, relu.
  [[nodiscard]] Tensor forward(const Tensor& x) const {
    if (const auto stats = detail::inference_stats(conv, bn))
      return detail::conv_bn_inference(conv, *stats, x, kernels::activation::relu);
    return functional::relu(bn(conv(x)));
  }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return bn.infer_shape(conv.infer_shape(x)); }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return conv.infer_dims(x); }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const { return detail::conv_bn_cost(conv, bn, x); }
  void onnx_export(functional::onnx_export_context& cx, const std::string& path) const {
    detail::onnx_export_conv_bn(cx, conv, bn, path, true);
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(ConvBnRelu2d)

}  // namespace tracemod::nn
