// Walking a graph hierarchy: the graphs, exprs and nodes reachable through module calls, in
// recursive execution order (iterative, so deep hierarchies do not exhaust the stack).
#pragma once

#include <tracemod/graph/graph.hpp>

#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tracemod::graph {

namespace detail {

/// The one walk behind graphs() and exprs(): the exprs of `root` in execution order and, when
/// `recursive`, those of every graph a module call reaches, each graph once, depth first in call
/// order. `enter(g)` runs when a graph is first reached (`root` included), `visit(e)` for each expr.
template <class Enter, class Visit>
void walk_call_order(const Graph& root, bool recursive, Enter&& enter, Visit&& visit) {
  std::unordered_set<const Graph*> seen{&root};
  enter(root);
  std::vector<std::pair<const Graph*, Graph::expr_list::const_iterator>> stack{{&root, root.expr_list_().begin()}};
  while (!stack.empty()) {
    auto& [g, it] = stack.back();
    if (it == g->expr_list_().end()) {
      stack.pop_back();
      continue;
    }
    Expr* e = (it++)->get();
    visit(e);
    if (!recursive) continue;
    if (Graph* sub = e->graph(); sub != nullptr && seen.insert(sub).second) {
      enter(*sub);
      stack.emplace_back(sub, sub->expr_list_().begin());  // `g` and `it` are not used after this
    }
  }
}

}  // namespace detail

inline std::vector<Graph*> Graph::graphs(bool recursive) const {
  if (!recursive) return {const_cast<Graph*>(this)};
  std::vector<Graph*> out;
  detail::walk_call_order(*this, true, [&](const Graph& g) { out.push_back(const_cast<Graph*>(&g)); }, [](const Expr*) {});
  return out;
}

inline ExprFilter Graph::exprs(bool recursive) const {
  std::vector<Expr*> out;
  detail::walk_call_order(
      *this, recursive,
      [&](const Graph& g) {
        for (const auto& in : g.inputs_) out.push_back(in.get());
      },
      [&](Expr* e) { out.push_back(e); });
  return ExprFilter(std::move(out));
}

inline NodeFilter Graph::nodes(bool recursive) const {
  std::vector<Node*> out;
  for (Expr* e : exprs(recursive))
    for (Node* n : e->outputs()) out.push_back(n);
  return NodeFilter(std::move(out));
}

inline NodeFilter NodeFilter::name_matches(std::string_view pattern, bool ignorecase) const {
  return where([&](const Node* n) {
    const std::string full = n->top_graph()->name() + "_" + n->name();
    return detail::glob_match(pattern, full, ignorecase) || detail::glob_match(pattern, n->name(), ignorecase);
  });
}

}  // namespace tracemod::graph
