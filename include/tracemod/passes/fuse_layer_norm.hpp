// FuseLayerNorm (beyond MegEngine; ONNX Runtime's LayerNormFusion): layer normalisation written out,
// as torch.onnx spells LayerNorm below opset 17 and as hand-written modules do,
//   m = mean(x, axes, keepdims)   d = x - m   v = mean(d ** 2 | d * d | square(d), axes, keepdims)
//   y = d / sqrt(v + eps)   then optionally   y * w   and   + b
// becomes one nn.layer_norm(x, w, b, normalized_shape, eps) call: one kernel that reads x twice
// instead of six elementwise and reduction calls writing five temporaries. Each step may be a
// function (elemwise.sub), a tensor method (__sub__) or its reflected form; which one it is comes from
// the op's arith_kind. The rules:
//   - both means reduce the same trailing axes of x (any spelling: -1, rank - 1, or all axes) and keep
//     them; the normalised shape is x's extents there, which must be static;
//   - eps is a number or a one-element Constant (it requires AttrToConstant, so that a tensor attribute,
//     as ONNX import makes of initializers, is a Constant by then), the exponent of a pow is 2;
//   - w and b are float32 tensors of exactly the normalised shape (no broadcasting from fewer dims);
//   - every intermediate result is used only inside the pattern and is not a graph output, so
//     nothing else reads a value the rewrite removes (MegEngine's single-user rule).
// The fused call's output keeps the root's shape; layer_norm accumulates its statistics in double,
// so outputs agree with the written-out chain to float rounding, not bit for bit.
#pragma once

#include <tracemod/functional/layer_norm.hpp>
#include <tracemod/functional/param_value.hpp>
#include <tracemod/functional/power.hpp>
#include <tracemod/functional/reduce.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/passes/pass.hpp>
#include <tracemod/passes/rewrite.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

namespace tracemod::passes {

namespace detail {

/// The expr producing a tensor operand, or null for a number or a graph input.
inline graph::Expr* producer_of(const graph::CallArg& a) {
  const auto* n = std::get_if<graph::Node*>(&a);
  return n != nullptr && *n != nullptr ? (*n)->expr() : nullptr;
}

inline graph::Node* node_of(const graph::CallArg& a) {
  const auto* n = std::get_if<graph::Node*>(&a);
  return n != nullptr ? *n : nullptr;
}

/// The operands of a binary arithmetic call of `kind` (not in place), in the order the math reads them.
struct arith_operands {
  graph::CallArg lhs, rhs;
};
inline std::optional<arith_operands> arith_of(const graph::Expr* e, functional::arith_kind kind) {
  if (e == nullptr) return std::nullopt;
  const functional::op_entry* op = e->op();
  if (op == nullptr || op->arith != kind || op->in_place || e->output_count() != 1 || op->operands.size() != 2)
    return std::nullopt;
  const std::vector<graph::CallArg> args = e->args();
  return op->reflected ? arith_operands{args[1], args[0]} : arith_operands{args[0], args[1]};
}

/// A layer normalisation found in a graph: what the fused call takes, and the exprs it replaces.
struct layer_norm_match {
  graph::Node* x = nullptr;
  functional::int_list normalized_shape;
  double eps = 0.0;
  graph::CallArg weight = Value(), bias = Value();
  std::vector<graph::Expr*> exprs;  ///< every matched expr; the first is the root
};

/// For a mean of `x` over trailing axes with keepdims: the normalised extents (static, float32 x).
inline std::optional<functional::int_list> trailing_mean_of(const graph::Expr* e, const graph::Node* x) {
  if (e == nullptr || e->op() != &functional::entry_of(functional::mean) || e->inputs().size() != 1 ||
      (x != nullptr && e->inputs()[0] != x))
    return std::nullopt;
  const auto* in = static_cast<const graph::TensorNode*>(e->inputs()[0]);
  const functional::erased_params erased = e->op()->make_params(params_of(*e));
  const auto& p = *static_cast<const functional::reduce_params*>(erased.get());
  if (!p.keepdims || in->dtype() != DType::float32) return std::nullopt;
  const Shape& s = in->shape();
  const kernels::axis_mask mask = functional::mean_fn::reduced_axes(p, s);
  const std::size_t r = s.rank();
  std::size_t first = r;
  while (first > 0 && mask[first - 1]) --first;
  if (first == r || std::any_of(mask.begin(), mask.begin() + static_cast<std::ptrdiff_t>(first), [](bool m) { return m; }))
    return std::nullopt;
  const Dims dims = in->dims();
  functional::int_list extents;
  for (std::size_t i = first; i < r; ++i) {
    if (!dims[i].is_constant()) return std::nullopt;
    extents.push_back(s[i]);
  }
  return extents;
}

/// Whether `e` squares `d`: d ** 2 (function or method, number or Constant exponent), d * d, square(d).
inline bool squares(const graph::Expr* e, const graph::Node* d) {
  if (e == nullptr || e->op() == nullptr || e->output_count() != 1) return false;
  if (e->op() == &functional::entry_of(functional::square)) return e->inputs().size() == 1 && e->inputs()[0] == d;
  if (const auto m = arith_of(e, functional::arith_kind::mul)) return node_of(m->lhs) == d && node_of(m->rhs) == d;
  if (e->op() != &functional::entry_of(functional::pow) && e->op() != &functional::entry_of(functional::method_pow))
    return false;
  const std::vector<graph::CallArg> args = e->args();
  const auto exponent = scalar_of(args[1]);
  return node_of(args[0]) == d && exponent && exponent->value == 2.0;
}

/// Matches d / sqrt(mean(d^2) + eps) with d = x - mean(x), from the div backwards.
inline bool match_normalize(graph::Expr* div, layer_norm_match& m) {
  const auto quotient = arith_of(div, functional::arith_kind::div);
  if (!quotient) return false;
  graph::Expr* sub = producer_of(quotient->lhs);
  graph::Expr* std_dev = producer_of(quotient->rhs);
  const auto centered = arith_of(sub, functional::arith_kind::sub);
  if (!centered || std_dev == nullptr || std_dev->op() != &functional::entry_of(functional::sqrt) ||
      std_dev->inputs().size() != 1)
    return false;
  graph::Node* x = node_of(centered->lhs);
  graph::Expr* mean = producer_of(centered->rhs);
  const auto extents = trailing_mean_of(mean, x);
  if (x == nullptr || !extents) return false;
  graph::Expr* shift = std_dev->inputs()[0]->expr();
  const auto sum = arith_of(shift, functional::arith_kind::add);
  if (!sum) return false;
  // var + eps or eps + var
  graph::Expr* var = producer_of(sum->lhs);
  auto eps = scalar_of(sum->rhs);
  if (!eps || var == nullptr || var->op() != &functional::entry_of(functional::mean)) {
    var = producer_of(sum->rhs);
    eps = scalar_of(sum->lhs);
  }
  if (!eps || var == nullptr) return false;
  const auto var_extents = trailing_mean_of(var, nullptr);
  if (!var_extents || *var_extents != *extents || !squares(var->inputs()[0]->expr(), sub->output())) return false;
  m.x = x;
  m.normalized_shape = *extents;
  m.eps = eps->value;
  for (graph::Expr* e : {div, std_dev, shift, var, var->inputs()[0]->expr(), sub, mean}) m.exprs.push_back(e);
  return true;
}

/// A float32 tensor operand of exactly the normalised shape (a weight or a bias).
inline bool is_affine_operand(const graph::CallArg& a, const functional::int_list& normalized) {
  const graph::Node* n = node_of(a);
  if (n == nullptr || !n->is_tensor()) return false;
  const auto* t = static_cast<const graph::TensorNode*>(n);
  if (t->dtype() != DType::float32 || t->shape().rank() != normalized.size()) return false;
  for (std::size_t i = 0; i < normalized.size(); ++i)
    if (t->shape()[i] != normalized[i]) return false;
  return true;
}

/// Matches the normalisation times a weight (either side), or the normalisation alone.
inline bool match_scaled(graph::Expr* e, layer_norm_match& m) {
  if (const auto product = arith_of(e, functional::arith_kind::mul)) {
    for (const auto& [norm, weight] : {std::pair{product->lhs, product->rhs}, std::pair{product->rhs, product->lhs}}) {
      layer_norm_match k;
      if (match_normalize(producer_of(norm), k) && is_affine_operand(weight, k.normalized_shape)) {
        k.weight = weight;
        k.exprs.insert(k.exprs.begin(), e);
        m = std::move(k);
        return true;
      }
    }
  }
  return match_normalize(e, m);
}

/// Matches a whole layer normalisation ending at `root`: with a bias added, a weight, both or neither.
inline bool match_layer_norm(graph::Expr& root, layer_norm_match& m) {
  if (const auto sum = arith_of(&root, functional::arith_kind::add)) {
    for (const auto& [scaled, bias] : {std::pair{sum->lhs, sum->rhs}, std::pair{sum->rhs, sum->lhs}}) {
      layer_norm_match k;
      if (match_scaled(producer_of(scaled), k) && is_affine_operand(bias, k.normalized_shape)) {
        k.bias = bias;
        k.exprs.insert(k.exprs.begin(), &root);
        m = std::move(k);
        return true;
      }
    }
  }
  return match_scaled(&root, m);
}

/// Whether every matched result but the root's is read only by matched exprs and is not a graph output,
/// and the weight and bias come from outside the match.
inline bool used_only_inside(const graph::Graph& g, const layer_norm_match& m) {
  const auto matched = [&](const graph::Expr* e) { return std::find(m.exprs.begin(), m.exprs.end(), e) != m.exprs.end(); };
  for (const graph::CallArg* a : {&m.weight, &m.bias})
    if (const graph::Expr* p = producer_of(*a); p != nullptr && matched(p)) return false;
  const std::vector<graph::Node*> outputs = g.outputs();
  for (std::size_t i = 1; i < m.exprs.size(); ++i) {
    const graph::Node* out = m.exprs[i]->output();
    if (std::find(outputs.begin(), outputs.end(), out) != outputs.end()) return false;
    for (const graph::Expr* user : out->users())
      if (!matched(user)) return false;
  }
  return true;
}

}  // namespace detail

inline graph::Expr* fuse_layer_norm(graph::Graph& g, graph::Expr& root) {
  detail::layer_norm_match m;
  if (!detail::match_layer_norm(root, m) || !detail::used_only_inside(g, m)) return nullptr;
  graph::Node* out = nullptr;
  {
    Builder b(g, root);
    out = b.call(functional::entry_of(functional::layer_norm), {m.x, m.weight, m.bias},
                 {functional::to_value(m.normalized_shape), Value(m.eps)});
  }
  return replace_if_same_shape(g, root.output(), out);
}

inline Pass fuse_layer_norm_pass() {
  return {.name = "FuseLayerNorm",
          .requirements = {"AttrToConstant"},  // eps may be an initializer (a getattr) in an imported model
          .run = [](graph::Graph& g) {
            // Last first: the bias add is visited before the multiply and the division it may take in.
            return rewrite_backward(g, [&](graph::Expr& e) { return fuse_layer_norm(g, e); });
          }};
}

}  // namespace tracemod::passes
