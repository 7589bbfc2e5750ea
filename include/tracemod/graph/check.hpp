// tmod::check(graph): the invariants every graph keeps (MLIR's verifier, torch.fx's lint), checked
// for the graph and every graph it calls. Throws graph_error naming the first broken invariant.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/graph.hpp>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tracemod::graph {

namespace detail {

inline std::string expr_ref(const Expr& e) {
  std::string s = "%";  // appended piecewise: g++ 12 misreports -Wrestrict on "literal" + std::string&&
  s += std::to_string(e.id());
  s += " (";
  s += e.target();
  s += ')';
  return s;
}

inline void check_one(const Graph& g, std::unordered_set<std::int64_t>& expr_ids,
                      std::unordered_set<std::int64_t>& node_ids) {
  const auto fail = [&](const std::string& why) { throw graph_error("check(" + g.name() + ".Graph): " + why); };
  std::unordered_set<const Node*> defined;
  std::unordered_map<std::string, const Node*> names;
  std::vector<const Expr*> order;
  const auto define = [&](const Expr& e) {
    if (e.top_graph() != &g) fail("expr " + expr_ref(e) + " says it belongs to another graph");
    if (!expr_ids.insert(e.id()).second) fail("expr id %" + std::to_string(e.id()) + " is used twice");
    for (const Node* n : e.outputs()) {
      if (n->expr() != &e) fail("node '" + n->name() + "' does not name " + expr_ref(e) + " as its producer");
      if (n->top_graph() != &g) fail("node '" + n->name() + "' says it belongs to another graph");
      if (!node_ids.insert(n->id()).second) fail("node id " + std::to_string(n->id()) + " is used twice");
      if (n->name().empty()) fail("a node produced by " + expr_ref(e) + " has no name");
      if (!names.emplace(n->name(), n).second) fail("the name '" + n->name() + "' is used by two nodes");
      defined.insert(n);
    }
  };
  for (const Expr* in : g.exprs(false)) {
    if (in->kind() != ExprKind::input) break;
    define(*in);
  }
  const auto inputs = g.inputs();
  if (inputs.empty() || inputs.front()->kind() != Node::Kind::module) fail("the first input must be the `self` module");
  std::unordered_map<const Node*, std::vector<const Expr*>> uses;
  for (const auto& up : g.expr_list_()) {
    const Expr& e = *up;
    if (e.kind() == ExprKind::input) fail("Input expr " + expr_ref(e) + " appears among the exprs");
    for (const Node* in : e.inputs()) {
      if (in->top_graph() != &g) fail(expr_ref(e) + " uses node '" + in->name() + "' of another graph");
      if (defined.count(in) == 0) fail(expr_ref(e) + " uses node '" + in->name() + "' before it is defined");
      uses[in].push_back(&e);
    }
    define(e);
    if (e.is_module_call()) {
      if (e.inputs().empty() || e.inputs().front()->kind() != Node::Kind::module)
        fail(expr_ref(e) + " calls something that is not a module");
      if (const Graph* sub = e.graph()) {
        if (sub->top_graph() != &g) fail(expr_ref(e) + " calls " + sub->name() + ".Graph, whose parent is another graph");
        std::size_t node_args = 0;
        for (const CallArg& a : e.args()) node_args += std::holds_alternative<Node*>(a) ? 1 : 0;
        if (sub->inputs().size() != node_args)
          fail(expr_ref(e) + " passes " + std::to_string(node_args - 1) + " values to " + sub->name() + ".Graph, which takes " +
               std::to_string(sub->inputs().size() - 1));
        if (sub->outputs().size() != e.output_count())
          fail(expr_ref(e) + " has " + std::to_string(e.output_count()) + " outputs but " + sub->name() + ".Graph returns " +
               std::to_string(sub->outputs().size()));
      }
    }
  }
  // users() lists every use, once per use.
  for (const Expr* e : g.exprs(false))
    for (const Node* n : e->outputs()) {
      std::vector<const Expr*> listed(n->users().begin(), n->users().end());
      std::vector<const Expr*> actual = uses[n];
      std::sort(listed.begin(), listed.end());
      std::sort(actual.begin(), actual.end());
      if (listed != actual)
        fail("node '" + n->name() + "' lists " + std::to_string(listed.size()) + " users, but " +
             std::to_string(actual.size()) + " exprs use it");
    }
  for (const Node* out : g.outputs())
    if (out == nullptr || defined.count(out) == 0) fail("an output is not produced in this graph");
  for (const auto& [name, n] : names)
    if (g.names().owner_of(name) != n) fail("the name '" + name + "' is not registered to its node in the namespace");
}

}  // namespace detail

/// Checks `g` and every graph it calls; throws graph_error naming the first broken invariant:
/// inputs defined before use, users() consistent with inputs, ids unique across the hierarchy,
/// names unique per graph, outputs produced in their graph, sub-graphs consistent with their calls.
inline void check(const Graph& g) {
  std::unordered_set<std::int64_t> expr_ids, node_ids;
  for (const Graph* sub : g.graphs(true)) detail::check_one(*sub, expr_ids, node_ids);
}

}  // namespace tracemod::graph

namespace tracemod {
using graph::check;
}  // namespace tracemod
