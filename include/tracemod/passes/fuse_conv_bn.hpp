// FuseConvBn (MegEngine's pass, run once; requires AttrToConstant): folds an inference batch norm
// into the conv that produces its input,
//   W' = W * gamma / sqrt(var + eps) (per output channel),  b' = beta + (b - mean) * gamma / sqrt(var + eps),
// for M::BatchNorm2d module calls and F::batch_norm calls with constant statistics (3, 4 or 5 constant
// tensor operands), after M::Conv2d module calls or F::conv2d calls with a constant weight (and a
// constant bias or none); grouped convs and convs without bias included. The conv's result must have
// no other user. A conv module called several times is copied as `<path>_<k>` for the call fused.
// A batch norm in training mode (batch statistics) is left alone.
#pragma once

#include <tracemod/functional/conv.hpp>
#include <tracemod/functional/normalization.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/passes/pass.hpp>
#include <tracemod/passes/pattern.hpp>
#include <tracemod/passes/rewrite.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace tracemod::passes {

namespace detail {

/// Inference batch norm statistics per channel; absent ones take their neutral value.
struct bn_stats {
  const Tensor* mean = nullptr;
  const Tensor* var = nullptr;
  const Tensor* gamma = nullptr;
  const Tensor* beta = nullptr;
  double eps = 1e-5;
};

/// (W', b') of a conv followed by a batch norm; `bias` may be undefined.
inline std::pair<Tensor, Tensor> fold_conv_bn(const Tensor& weight, const Tensor& bias, const bn_stats& bn) {
  const std::int64_t out = weight.shape()[0];
  const std::int64_t per_out = weight.numel() / std::max<std::int64_t>(out, 1);
  const auto at = [](const Tensor* t, std::int64_t i, double neutral) {
    return t != nullptr ? static_cast<double>(t->data<float>()[i]) : neutral;
  };
  Tensor w = Tensor::empty(weight.shape(), DType::float32, "FuseConvBn");
  Tensor b = Tensor::empty(Shape{out}, DType::float32, "FuseConvBn");
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

/// Whether every statistic is a float32 (C,) tensor for a conv of C output channels.
inline bool stats_fit(const bn_stats& bn, std::int64_t channels) {
  for (const Tensor* t : {bn.mean, bn.var, bn.gamma, bn.beta})
    if (t != nullptr && !(t->defined() && t->dtype() == DType::float32 && t->shape() == Shape{channels})) return false;
  return true;
}

struct conv_bn_patterns {
  Pattern conv_module = is_op<nn::Conv2d>();
  Pattern conv_function =
      is_op(functional::conv2d)(any_node(), is_const()) | is_op(functional::conv2d)(any_node(), is_const(), is_const());
  Pattern conv = conv_module | conv_function;
  Pattern bn_module = is_op<nn::BatchNorm2d>()(conv).has_attr<nn::BatchNorm2d>(
      [](const nn::BatchNorm2d& bn) { return !bn.training() && bn.running_mean.defined(); });
  Pattern bn_function = bn_call(conv, 3) | bn_call(conv, 4) | bn_call(conv, 5);
  Pattern bn = bn_module | bn_function;

  /// F::batch_norm(conv, c, ..., c) with n tensor operands, in inference mode.
  static Pattern bn_call(const Pattern& conv, int n) {
    Pattern p = n == 3   ? is_op(functional::batch_norm)(conv, is_const(), is_const())
                : n == 4 ? is_op(functional::batch_norm)(conv, is_const(), is_const(), is_const())
                         : is_op(functional::batch_norm)(conv, is_const(), is_const(), is_const(), is_const());
    return p.has_params("training", Value(false));
  }
};

/// The statistics of a matched batch norm (module or function call).
inline std::optional<bn_stats> stats_of(const graph::Expr& bn) {
  bn_stats s;
  if (bn.is_module_call()) {
    const auto* m = dynamic_cast<const nn::BatchNorm2d*>(callee_of(bn));
    if (m == nullptr) return std::nullopt;
    s.mean = &m->running_mean;
    s.var = &m->running_var;
    s.gamma = m->weight.defined() ? &m->weight : nullptr;
    s.beta = m->bias.defined() ? &m->bias : nullptr;
    s.eps = m->eps;
    return s;
  }
  for (const auto& [name, arg] : bn.named_args()) {
    const Tensor* t = nullptr;
    if (const auto* n = std::get_if<graph::Node*>(&arg)) t = constant_tensor(*n);
    if (name == "running_mean") s.mean = t;
    if (name == "running_var") s.var = t;
    if (name == "weight") s.gamma = t;
    if (name == "bias") s.beta = t;
    if (name == "eps") s.eps = std::get<Value>(arg).number();
  }
  return s;
}

}  // namespace detail

inline graph::Expr* fuse_conv_bn(graph::Graph& g, graph::Expr& bn) {
  static const detail::conv_bn_patterns patterns;
  PatternMatcher m;
  if (!m.match(patterns.bn, bn)) return nullptr;
  graph::Expr& conv = *m[patterns.conv];
  const std::optional<detail::bn_stats> stats = detail::stats_of(bn);
  if (!stats) return nullptr;
  if (conv.is_module_call()) {
    const auto* original = dynamic_cast<const nn::Conv2d*>(callee_of(conv));
    if (original == nullptr || !detail::stats_fit(*stats, original->out_channels)) return nullptr;
    auto [w, b] = detail::fold_conv_bn(original->weight, original->bias, *stats);
    nn::Conv2d* target = private_callee<nn::Conv2d>(g, conv);
    if (target == nullptr) return nullptr;
    target->weight = Parameter(std::move(w));
    target->bias = Parameter(std::move(b));
    g.changed();
    replace_and_compile(g, bn.output(), conv.output(), /*keep_name=*/true);
    return &conv;
  }
  const Tensor& weight = *constant_tensor(conv.inputs()[1]);
  const Tensor* bias = conv.inputs().size() > 2 ? constant_tensor(conv.inputs()[2]) : nullptr;
  if (weight.dtype() != DType::float32 || weight.shape().rank() != 4 || !detail::stats_fit(*stats, weight.shape()[0]))
    return nullptr;
  auto [w, b] = detail::fold_conv_bn(weight, bias != nullptr ? *bias : Tensor(), *stats);
  graph::Node* out = nullptr;
  {
    Builder builder(g, conv);
    graph::Node* wn = builder.constant(w, conv.inputs()[1]->name());
    graph::Node* bn_node = builder.constant(b, "const_tensor");
    out = builder.recall(conv, {conv.inputs()[0], wn, bn_node});
  }
  const std::string name = conv.output()->name();
  replace_and_compile(g, bn.output(), out, /*keep_name=*/true);
  if (out->name() != name && !g.names().taken(name)) out->set_name(name);
  return out->expr();
}

inline Pass fuse_conv_bn_pass() {
  return {"FuseConvBn", {"AttrToConstant"}, true, 1, [](graph::Graph& g) {
            // First call first: a conv module called twice keeps its name for its last call
            // (MegEngine's documented renaming).
            return rewrite_forward(g, [&](graph::Expr& e) { return fuse_conv_bn(g, e); });
          }};
}

}  // namespace tracemod::passes
