// AttrToConstant (MegEngine's helper pass, run once): every getattr of a tensor becomes a Constant
// holding a copy of the attribute's current value, under the getattr's node name, so later passes
// can read and fold weights. Module getattrs stay.
#pragma once

#include <tracemod/graph/graph.hpp>
#include <tracemod/nn/module.hpp>
#include <tracemod/passes/pass.hpp>
#include <tracemod/passes/rewrite.hpp>

#include <iterator>

namespace tracemod::passes {

inline graph::Expr* attr_to_constant(graph::Graph& g, graph::Expr& e) {
  if (e.kind() != graph::ExprKind::get_attr || !e.output()->is_tensor()) return nullptr;
  const graph::Node* base = e.inputs().front();
  if (base->is_tensor()) return nullptr;
  const Module* m = static_cast<const graph::ModuleNode*>(base)->owner();
  if (m == nullptr || !m->has_attr(e.name())) return nullptr;
  const ConstAttrRef ref = m->getattr(e.name());
  if (ref.is_module() || !ref.tensor().defined()) return nullptr;
  const auto next = std::next(g.iterator_of(&e));
  if (next == g.expr_list_().end()) return nullptr;  // unused: nothing to replace
  graph::Node* c = nullptr;
  {
    Builder b(g, **next);
    c = b.constant(ref.tensor().clone(), e.output()->name());
  }
  replace_and_erase(g, e.output(), c);
  return c->expr();
}

inline Pass attr_to_constant_pass() {
  return {.name = "AttrToConstant",
          .run = [](graph::Graph& g) {
            return rewrite_forward(g, [&](graph::Expr& e) { return attr_to_constant(g, e); });
          }};
}

}  // namespace tracemod::passes
