// FoldConstant (MegEngine's FlodConstant, repeated until nothing changes): an op call whose inputs
// all come from Constant exprs runs now and becomes a Constant of its result. Only ops whose
// definition says they are foldable (functional/op.hpp: no effect besides the result) are run.
#pragma once

#include <tracemod/graph/graph.hpp>
#include <tracemod/passes/pass.hpp>
#include <tracemod/passes/rewrite.hpp>

#include <vector>

namespace tracemod::passes {

inline graph::Expr* fold_constant(graph::Graph& g, graph::Expr& e) {
  if (e.op() == nullptr || !e.op()->foldable || e.inputs().empty() || e.output_count() != 1) return nullptr;
  std::vector<graph::NodeValue> values;
  for (const graph::Node* in : e.inputs()) {
    const Tensor* t = constant_tensor(in);
    if (t == nullptr) return nullptr;
    values.emplace_back(Value(*t));
  }
  const std::vector<graph::NodeValue> out = e.interpret(values);
  const auto* v = std::get_if<Value>(&out.front());
  if (v == nullptr || !v->is_tensor()) return nullptr;
  graph::Node* c = nullptr;
  {
    Builder b(g, e);
    c = b.constant(v->tensor(), e.output()->name());
  }
  replace_and_erase(g, e.output(), c);
  return c->expr();
}

inline Pass fold_constant_pass() {
  return {.name = "FoldConstant",
          .requirements = {"AttrToConstant"},
          .run_once = false,
          .run = [](graph::Graph& g) {
            return rewrite_forward(g, [&](graph::Expr& e) { return fold_constant(g, e); });
          }};
}

}  // namespace tracemod::passes
