// TracedModule::flatten(): a copy whose top graph inlines every call of a user module, so it holds
// only builtin module calls, functions and tensor methods (MegEngine's flatten). Inlined nodes are
// named `<callee node name>_<name>` (so `layer1`, block `_0`, `conv1` become `layer1__0_conv1`);
// the outputs of a call keep the call's names; getattr chains become dotted paths
// (`getattr(self, "layer1.0.conv1")`); ids are renumbered. The module tree, and so state_dict(),
// is unchanged. Inlining works through the graph as a worklist (a call's inlined body is scanned
// again), so deep module hierarchies cost no recursion.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <algorithm>
#include <iterator>
#include <string>
#include <unordered_map>
#include <vector>

namespace tracemod {

namespace detail {

/// Replaces the user-module call `call` of `g` by the exprs of its callee graph.
inline void inline_call(graph::Graph& g, graph::Expr* call) {
  const graph::Graph& sub = *call->graph();
  const std::vector<graph::Node*> sub_inputs = sub.inputs();
  std::vector<graph::Node*> call_nodes;  // the module node, then the node arguments, in input order
  for (const graph::CallArg& a : call->args())
    if (const auto* n = std::get_if<graph::Node*>(&a)) call_nodes.push_back(*n);
  if (call_nodes.size() != sub_inputs.size())
    throw graph_error("flatten: call %" + std::to_string(call->id()) + " passes " + std::to_string(call_nodes.size() - 1) +
                      " values to " + sub.name() + ".Graph, which takes " + std::to_string(sub_inputs.size() - 1));
  std::unordered_map<const graph::Node*, graph::Node*> map;
  for (std::size_t i = 0; i < sub_inputs.size(); ++i) map[sub_inputs[i]] = call_nodes[i];
  const std::string prefix = call_nodes.front()->name() + "_";
  g.set_insert_point(g.iterator_of(call));
  for (const auto& e : sub.expr_list_()) {
    const graph::Expr* copy = g.copy_expr(*e, [&](const graph::Node* n) { return map.at(n); }, prefix);
    for (std::size_t i = 0; i < e->output_count(); ++i) map[e->output(i)] = copy->output(i);
  }
  g.reset_insert_point();
  // The call's outputs are now the callee's output values; they keep the call's names.
  const std::vector<graph::Node*> sub_outputs = sub.outputs();
  std::vector<std::pair<graph::Node*, std::string>> renames;
  for (std::size_t i = 0; i < sub_outputs.size(); ++i) {
    graph::Node* outer = call->output(i);
    graph::Node* inner = map.at(sub_outputs[i]);
    g.replace_all_uses(outer, inner);
    if (inner->expr()->kind() != graph::ExprKind::input && std::find(call_nodes.begin(), call_nodes.end(), inner) == call_nodes.end())
      renames.emplace_back(inner, outer->name());
  }
  g.erase(call);
  for (auto& [node, name] : renames) g.rename_unique(node, name);
}

}  // namespace detail

inline TracedModule TracedModule::flatten() const {
  TracedModule flat(*this);
  graph::Graph& g = flat.graph();
  for (auto it = g.expr_list_().begin(); it != g.expr_list_().end();) {
    graph::Expr* e = it->get();
    if (e->graph() == nullptr) {
      ++it;
      continue;
    }
    // Resume right before the inlined body, so calls inside it are inlined in turn.
    const bool at_front = it == g.expr_list_().begin();
    const auto before = at_front ? it : std::prev(it);
    detail::inline_call(g, e);
    it = at_front ? g.expr_list_().begin() : std::next(before);
  }
  g.compile();
  flat.reset_ids();
  return flat;
}

}  // namespace tracemod
