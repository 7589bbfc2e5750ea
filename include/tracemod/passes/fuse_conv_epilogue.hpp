// FuseConvEpilogue (beyond MegEngine; run once; requires FuseConvBn, so that a folded batch norm is
// the conv's bias by now): a conv followed by its epilogue becomes one conv_bias_activation call,
// whose kernel adds the bias and the residual and applies the activation while the output tile is
// still in registers or cache:
//   act(conv(x)),  act(conv(x) + z),  act(z + conv(x)),  conv(x) + z   ->   nn.conv_bias_activation(x, W, b, z, ..., mode)
// with act relu or relu6 (function or module) and the add a method (`+`, `+=`) or elemwise.add. The
// conv is an M::Conv2d call (its weight and bias become Constants sharing the module's tensors) or
// an F::conv2d call with a constant weight and a constant bias or none. The conv's result and the add's
// must have no other user (MegEngine's rule: the matcher refuses otherwise); z must have the conv
// output's shape (no broadcasting in the epilogue) and may not be the conv's own result.
#pragma once

#include <tracemod/functional/conv.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/functional/param_value.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/passes/pass.hpp>
#include <tracemod/passes/pattern.hpp>
#include <tracemod/passes/rewrite.hpp>

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace tracemod::passes {

namespace detail {

struct conv_epilogue_patterns {
  /// A rewrite: the pattern at the root, the kernel's activation, and whether the root's chain
  /// holds the residual add.
  struct epilogue {
    Pattern root;
    std::string_view mode;
    bool residual;
  };

  Pattern conv = is_op<nn::Conv2d>() | is_op(functional::conv2d)(any_node(), is_const()) |
                 is_op(functional::conv2d)(any_node(), is_const(), is_const());
  Pattern z = any_node();
  Pattern residual = add_of(conv, z) | add_of(z, conv);
  // Tried in order: with the residual add before without it, so relu(conv + z) takes the add too.
  std::array<epilogue, 5> epilogues{{{relu_of(residual), "relu", true},
                                     {relu_of(conv), "relu", false},
                                     {relu6_of(residual), "relu6", true},
                                     {relu6_of(conv), "relu6", false},
                                     {residual, "identity", true}}};

  static Pattern add_of(const Pattern& a, const Pattern& b) {
    return (a + b) | is_op(functional::add)(a, b) | is_op(functional::method_iadd)(a, b);
  }
  static Pattern relu_of(const Pattern& p) { return is_op(functional::relu)(p) | is_op<nn::ReLU>()(p); }
  static Pattern relu6_of(const Pattern& p) { return is_op(functional::relu6)(p) | is_op<nn::ReLU6>()(p); }
};

/// The weight Constant of the fused call. When its kernel would keep Winograd filters
/// (kernels::conv2d_prefers_winograd_filters, on the traced input shape) it is a private read-only
/// copy: conv_bias_activation then transforms it once instead of on every call, which is safe because
/// nothing can write to it any more (Tensor::make_read_only). The original, a module's tensor that
/// the user may still change, stays writable and is no longer read. Otherwise `existing` (the conv's
/// own Constant) or a new Constant sharing `weight`.
inline graph::Node* weight_operand(Builder& b, const graph::Expr& conv, const Tensor& weight,
                                   const functional::conv2d_params& p, graph::Node* existing, const std::string& name) {
  const auto* x = static_cast<const graph::TensorNode*>(conv.inputs()[conv.is_module_call() ? 1 : 0]);
  if (kernels::conv2d_prefers_winograd_filters(functional::conv2d_fn::geometry(p, x->shape(), weight.shape(), nullptr))) {
    Tensor copy = weight.clone();
    copy.make_read_only();
    return b.constant(copy, name);
  }
  return existing != nullptr ? existing : b.constant(weight, name);
}

/// The operands and params of conv_bias_activation for a matched conv (module or function call). A
/// module's weight and bias become Constants sharing its tensors (FuseConvBn's AttrToConstant has
/// made every other tensor attribute a Constant already; a getattr would be copied by the next
/// AttrToConstant, which FuseElemwise requires), the weight a copy where weight_operand says so.
inline std::pair<std::vector<graph::CallArg>, std::vector<Value>> conv_operands(Builder& b, const graph::Expr& conv) {
  const auto tensor_input = [&](std::size_t i) { return static_cast<graph::Node*>(conv.inputs()[i]); };
  if (conv.is_module_call()) {
    const auto* m = dynamic_cast<const nn::Conv2d*>(conv.callee());
    const std::string name = conv.inputs().front()->name();
    graph::Node* w = weight_operand(b, conv, m->weight, {m->stride, m->padding, m->dilation, m->groups}, nullptr,
                                    name + "_weight");
    graph::CallArg bias = Value();
    if (m->bias.defined()) bias = static_cast<graph::Node*>(b.constant(m->bias, name + "_bias"));
    return {{tensor_input(1), w, bias},
            {functional::to_value(m->stride), functional::to_value(m->padding), functional::to_value(m->dilation),
             Value(m->groups)}};
  }
  std::vector<Value> params;
  for (const auto& [name, arg] : conv.named_args())
    if (name == "stride" || name == "padding" || name == "dilation" || name == "groups")
      params.push_back(std::get<Value>(arg));
  const functional::erased_params p = conv.op()->make_params(params);
  graph::Node* w = weight_operand(b, conv, *constant_tensor(tensor_input(1)),
                                  *static_cast<const functional::conv2d_params*>(p.get()), tensor_input(1),
                                  tensor_input(1)->name());
  std::vector<graph::CallArg> operands{tensor_input(0), w,
                                       conv.inputs().size() > 2 ? graph::CallArg(tensor_input(2)) : graph::CallArg(Value())};
  return {operands, params};
}

}  // namespace detail

inline graph::Expr* fuse_conv_epilogue(graph::Graph& g, graph::Expr& root) {
  static const detail::conv_epilogue_patterns patterns;  // read-only after construction
  PatternMatcher m;
  const detail::conv_epilogue_patterns::epilogue* matched = nullptr;
  for (const auto& ep : patterns.epilogues)
    if (m.match(ep.root, root)) {
      matched = &ep;
      break;
    }
  if (matched == nullptr) return nullptr;
  const graph::Expr& conv = *m[patterns.conv];
  if (conv.is_module_call() && dynamic_cast<const nn::Conv2d*>(conv.callee()) == nullptr) return nullptr;
  const auto* conv_out = static_cast<const graph::TensorNode*>(conv.output());
  graph::CallArg z = Value();
  if (matched->residual) {
    // The add is the root or the activation's input; z is its other tensor input.
    const graph::Expr& add = root.op() != nullptr && root.op()->arith == functional::arith_kind::add
                                 ? root
                                 : *root.inputs()[root.is_module_call() ? 1 : 0]->expr();
    graph::Node* other = add.inputs()[0] == conv_out ? add.inputs()[1] : add.inputs()[0];
    const auto* zt = static_cast<const graph::TensorNode*>(other);
    if (other == conv_out || zt->shape() != conv_out->shape() || zt->dtype() != DType::float32) return nullptr;
    z = other;
  }
  graph::Node* out = nullptr;
  {
    Builder b(g, root);
    auto [operands, params] = detail::conv_operands(b, conv);
    operands.push_back(z);
    params.emplace_back(std::string(matched->mode));
    out = b.call(functional::entry_of(functional::conv_bias_activation), operands, params);
  }
  return replace_if_same_shape(g, root.output(), out);
}

inline Pass fuse_conv_epilogue_pass() {
  return {.name = "FuseConvEpilogue",
          .requirements = {"FuseConvBn"},
          .run = [](graph::Graph& g) {
            // Last first: an activation is visited before the add and the conv it may take in.
            return rewrite_backward(g, [&](graph::Expr& e) { return fuse_conv_epilogue(g, e); });
          }};
}

}  // namespace tracemod::passes
