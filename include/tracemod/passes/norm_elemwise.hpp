// NormElemWise (MegEngine's helper pass, repeated until nothing changes): rewrites the arithmetic
// ops (functions and tensor methods, reflected and in-place forms: their arith_kind comes from the
// op's definition) into add-only and mul-only form with the variable on the left and the constant
// (a number or a Constant node) on the right:
//   c + x, F.add(x, c), x += c  ->  x + c          x - c  ->  x + (-c)       c - x  ->  (-x) + c
//   c * x, F.mul(x, c)          ->  x * c          x / c  ->  x * (1/c)      x - y  ->  x + (-y)
// tracemod has no pow op, so c / x and x / y (MegEngine's F.pow(., -1)) stay as they are.
// It rewrites float32 exprs only: int32 arithmetic (shapes as values) has no negation or reciprocal.
#pragma once

#include <tracemod/functional/registry.hpp>
#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/passes/pass.hpp>
#include <tracemod/passes/rewrite.hpp>

#include <optional>
#include <string>
#include <vector>
#include <variant>

namespace tracemod::passes {

namespace detail {

/// An operand that is a constant: a number or a node produced by a Constant expr.
inline bool is_constant_arg(const graph::CallArg& a) {
  if (const auto* v = std::get_if<Value>(&a)) return v->is_number();
  if (const auto* n = std::get_if<graph::Node*>(&a)) return constant_tensor(*n) != nullptr;
  return false;
}

/// f applied to a constant operand: a number stays a number, a Constant node becomes a new Constant.
inline graph::CallArg map_constant(Builder& b, const graph::CallArg& a, double (*f)(double)) {
  if (const auto* v = std::get_if<Value>(&a)) return Value(f(v->number()));
  return b.constant(map_tensor(*constant_tensor(std::get<graph::Node*>(a)), f));
}

}  // namespace detail

inline graph::Expr* norm_elemwise(graph::Graph& g, graph::Expr& e) {
  using functional::arith_kind;
  const functional::op_entry* op = e.op();
  if (op == nullptr || e.output_count() != 1 || op->operands.size() != 2) return nullptr;
  // float32 only: int32 arithmetic (shapes as values) has no negation op and no reciprocal.
  if (static_cast<const graph::TensorNode*>(e.output())->dtype() != DType::float32) return nullptr;
  const arith_kind kind = op->arith;
  if (kind != arith_kind::add && kind != arith_kind::sub && kind != arith_kind::mul && kind != arith_kind::div)
    return nullptr;
  const std::vector<graph::CallArg> args = e.args();
  // The operands in the order the math reads them: lhs OP rhs.
  graph::CallArg lhs = op->reflected ? args[1] : args[0];
  graph::CallArg rhs = op->reflected ? args[0] : args[1];
  const bool lhs_const = detail::is_constant_arg(lhs), rhs_const = detail::is_constant_arg(rhs);
  if (lhs_const && rhs_const) return nullptr;  // FoldConstant's job
  if (!std::holds_alternative<graph::Node*>(lhs) && !std::holds_alternative<graph::Node*>(rhs)) return nullptr;
  const bool commutative = kind == arith_kind::add || kind == arith_kind::mul;
  const bool normal_method = op->kind == functional::call_kind::method && !op->reflected && !op->in_place;
  if (commutative && normal_method && !lhs_const) return nullptr;  // already x + c, x + y, x * c, x * y
  if (kind == arith_kind::div && !rhs_const) return nullptr;       // needs pow
  const auto& add = functional::entry_of<functional::method_add_fn>();
  const auto& mul = functional::entry_of<functional::method_mul_fn>();
  graph::Node* out = nullptr;
  {
    Builder b(g, e);
    switch (kind) {
      case arith_kind::add: out = b.call(add, {lhs_const ? rhs : lhs, lhs_const ? lhs : rhs}); break;
      case arith_kind::mul: out = b.call(mul, {lhs_const ? rhs : lhs, lhs_const ? lhs : rhs}); break;
      case arith_kind::sub:
        if (rhs_const)
          out = b.call(add, {lhs, detail::map_constant(b, rhs, [](double c) { return -c; })});
        else if (lhs_const)
          out = b.call(add, {b.call(functional::entry_of<functional::neg_fn>(), {rhs}), lhs});
        else
          out = b.call(add, {lhs, b.call(functional::entry_of<functional::neg_fn>(), {rhs})});
        break;
      case arith_kind::div: out = b.call(mul, {lhs, detail::map_constant(b, rhs, [](double c) { return 1.0 / c; })}); break;
      default: return nullptr;
    }
  }
  return replace_if_same_shape(g, e.output(), out);  // x += y keeps x's shape
}

inline Pass norm_elemwise_pass() {
  return {.name = "NormElemWise",
          .requirements = {"FoldConstant"},
          .run_once = false,
          .run = [](graph::Graph& g) {
            return rewrite_backward(g, [&](graph::Expr& e) { return norm_elemwise(g, e); });
          }};
}

}  // namespace tracemod::passes
