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

inline std::vector<Graph*> Graph::graphs(bool recursive) const {
  std::vector<Graph*> out{const_cast<Graph*>(this)};
  if (!recursive) return out;
  std::unordered_set<const Graph*> seen{this};
  // Iterative pre-order walk in call order (deep hierarchies must not exhaust the stack).
  std::vector<std::pair<const Graph*, expr_list::const_iterator>> stack{{this, exprs_.begin()}};
  while (!stack.empty()) {
    auto& [g, it] = stack.back();
    if (it == g->exprs_.end()) {
      stack.pop_back();
      continue;
    }
    const Expr* e = (it++)->get();
    if (Graph* sub = e->graph(); sub != nullptr && seen.insert(sub).second) {
      out.push_back(sub);
      stack.emplace_back(sub, sub->exprs_.begin());
    }
  }
  return out;
}

inline ExprFilter Graph::exprs(bool recursive) const {
  std::vector<Expr*> out;
  std::unordered_set<const Graph*> seen{this};
  const auto visit_inputs = [&](const Graph* g) {
    for (const auto& in : g->inputs_) out.push_back(in.get());
  };
  visit_inputs(this);
  std::vector<std::pair<const Graph*, expr_list::const_iterator>> stack{{this, exprs_.begin()}};
  while (!stack.empty()) {
    auto& [g, it] = stack.back();
    if (it == g->exprs_.end()) {
      stack.pop_back();
      continue;
    }
    Expr* e = (it++)->get();
    out.push_back(e);
    if (!recursive) continue;
    if (Graph* sub = e->graph(); sub != nullptr && seen.insert(sub).second) {
      visit_inputs(sub);
      stack.emplace_back(sub, sub->exprs_.begin());
    }
  }
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
