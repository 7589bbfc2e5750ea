// FuseConvBn (MegEngine's pass, run once; requires AttrToConstant): folds an inference batch norm
// into the conv that produces its input,
//   W' = W * gamma / sqrt(var + eps) (per output channel),  b' = beta + (b - mean) * gamma / sqrt(var + eps)
// (functional::fold_conv_bn, shared with the eval-mode ConvBn2d / ConvBnRelu2d modules), for
// M::BatchNorm2d module calls and F::batch_norm calls with constant statistics (3, 4 or 5 constant
// tensor operands), after M::Conv2d module calls or F::conv2d calls with a constant weight (and a
// constant bias or none); grouped convs and convs without bias included. The conv's result must have
// no other user. A conv module called several times is copied as `<path>_<k>` for the call fused.
// A batch norm in training mode (batch statistics) is left alone.
#pragma once

#include <tracemod/functional/conv.hpp>
#include <tracemod/functional/fold_batch_norm.hpp>
#include <tracemod/functional/normalization.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/passes/pass.hpp>
#include <tracemod/passes/pattern.hpp>
#include <tracemod/passes/rewrite.hpp>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace tracemod::passes {

namespace detail {

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
inline std::optional<functional::batch_norm_stats> stats_of(const graph::Expr& bn) {
  functional::batch_norm_stats s;
  if (bn.is_module_call()) {
    const auto* m = dynamic_cast<const nn::BatchNorm2d*>(bn.callee());
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
  const std::optional<functional::batch_norm_stats> stats = detail::stats_of(bn);
  if (!stats) return nullptr;
  if (conv.is_module_call()) {
    const auto* original = dynamic_cast<const nn::Conv2d*>(conv.callee());
    if (original == nullptr || !functional::stats_fit(*stats, original->out_channels)) return nullptr;
    auto [w, b] = functional::fold_conv_bn(original->weight, original->bias, *stats);
    nn::Conv2d* target = private_callee<nn::Conv2d>(g, conv);
    if (target == nullptr) return nullptr;
    target->weight = Parameter(std::move(w));
    target->bias = Parameter(std::move(b));
    g.changed();
    replace_and_erase(g, bn.output(), conv.output(), /*keep_name=*/true);
    return &conv;
  }
  const Tensor& weight = *constant_tensor(conv.inputs()[1]);
  const Tensor* bias = conv.inputs().size() > 2 ? constant_tensor(conv.inputs()[2]) : nullptr;
  if (weight.dtype() != DType::float32 || weight.shape().rank() != 4 || !functional::stats_fit(*stats, weight.shape()[0]))
    return nullptr;
  auto [w, b] = functional::fold_conv_bn(weight, bias != nullptr ? *bias : Tensor(), *stats);
  graph::Node* out = nullptr;
  {
    Builder builder(g, conv);
    graph::Node* wn = builder.constant(w, conv.inputs()[1]->name());
    graph::Node* bn_node = builder.constant(b, "const_tensor");
    out = builder.recall(conv, {conv.inputs()[0], wn, bn_node});
  }
  const std::string name = conv.output()->name();
  replace_and_erase(g, bn.output(), out, /*keep_name=*/true);
  if (out->name() != name && !g.names().taken(name)) out->set_name(name);
  return out->expr();
}

inline Pass fuse_conv_bn_pass() {
  return {.name = "FuseConvBn",
          .requirements = {"AttrToConstant"},
          .run = [](graph::Graph& g) {
            // First call first: a conv module called twice keeps its name for its last call
            // (MegEngine's documented renaming).
            return rewrite_forward(g, [&](graph::Expr& e) { return fuse_conv_bn(g, e); });
          }};
}

}  // namespace tracemod::passes
