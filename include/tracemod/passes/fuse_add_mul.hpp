// FuseAddMul (MegEngine's pass, repeated until nothing changes; requires NormElemWise): folds a
// chain of two constant additions, or of two constant multiplications and negations, into one op:
//   (x + c1) + c2  ->  x + (c1 + c2)        (x * c1) * c2, -(x * c), (-x) * c, -(-x)  ->  x * (c1 * c2)
// and drops the op when the folded constant is the identity (0 for add, 1 for mul). A constant is a
// number or a Constant of shape (1,) or (); the inner op's result must have no other user.
#pragma once

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/passes/pass.hpp>
#include <tracemod/passes/pattern.hpp>
#include <tracemod/passes/rewrite.hpp>

#include <optional>

namespace tracemod::passes {

namespace detail {

/// The constant an add/mul/neg expr applies (neg is a multiplication by -1).
inline std::optional<scalar_constant> applied_constant(const graph::Expr& e) {
  if (e.op()->arith == functional::arith_kind::neg) return scalar_constant{-1.0, std::nullopt};
  return scalar_of(e.args()[1]);
}

struct add_mul_patterns {
  Pattern x = is_var();
  Pattern inner_add = (x + is_const()) | (x + scalar);
  Pattern add_add = (inner_add + is_const()) | (inner_add + scalar);
  Pattern inner_mul = scale_of(x);
  Pattern mul_mul = scale_of(inner_mul);

  /// p * c, p * number, -p (function or method).
  static Pattern scale_of(const Pattern& p) {
    return (p * is_const()) | (p * scalar) | is_op(functional::neg)(p) | is_op(functional::method_neg)(p);
  }
};

}  // namespace detail

inline graph::Expr* fuse_add_mul(graph::Graph& g, graph::Expr& e) {
  static const detail::add_mul_patterns patterns;  // read-only after construction
  PatternMatcher m;
  bool is_add = false;
  graph::Expr* inner = nullptr;
  if (m.match(patterns.add_add, e)) {
    is_add = true;
    inner = m[patterns.inner_add];
  } else if (m.match(patterns.mul_mul, e)) {
    inner = m[patterns.inner_mul];
  } else {
    return nullptr;
  }
  graph::Node* x = inner->inputs().front();
  const auto outer_c = detail::applied_constant(e);
  const auto inner_c = detail::applied_constant(*inner);
  if (!outer_c || !inner_c) return nullptr;  // a tensor constant of another shape
  const double c = is_add ? outer_c->value + inner_c->value : outer_c->value * inner_c->value;
  // The folded constant keeps a tensor's shape so that the result's shape does not change.
  const std::optional<Shape> shape = outer_c->shape ? outer_c->shape : inner_c->shape;
  const auto* out = static_cast<const graph::TensorNode*>(e.output());
  const auto* xt = static_cast<const graph::TensorNode*>(x);
  if (c == (is_add ? 0.0 : 1.0) && xt->shape() == out->shape()) {
    replace_and_erase(g, e.output(), x);
    return x->expr();  // the op that produces x: its own pair may fold now
  }
  graph::Node* folded = nullptr;
  {
    Builder b(g, e);
    const graph::CallArg constant = shape ? graph::CallArg(b.constant(full(*shape, c))) : graph::CallArg(Value(c));
    const auto& op = is_add ? functional::entry_of<functional::method_add_fn>() : functional::entry_of<functional::method_mul_fn>();
    folded = b.call(op, {x, constant});
  }
  return replace_if_same_shape(g, e.output(), folded);
}

inline Pass fuse_add_mul_pass() {
  return {.name = "FuseAddMul",
          .requirements = {"NormElemWise"},
          .run_once = false,
          .run = [](graph::Graph& g) {
            return rewrite_backward(g, [&](graph::Expr& e) { return fuse_add_mul(g, e); });
          }};
}

}  // namespace tracemod::passes
