// The local dead-expr sweep a rewrite ends with: erase_unused(g, exprs) deletes the given exprs when
// nothing uses them, then the exprs that fed them when that left them unused, and so on back. Its
// cost is the size of what it deletes, where Graph::compile() walks the whole graph; the exprs of a
// graph compute nothing besides their outputs, so an expr nothing uses is dead, as compile() deems it.
#pragma once

#include <tracemod/graph/graph.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <unordered_set>
#include <vector>

namespace tracemod::passes {

/// Whether nothing uses `e`: it is no input of the graph, no output of it has a user, and none is a
/// graph output (`outputs`: the graph's outputs).
inline bool unused(const graph::Expr& e, const std::vector<graph::Node*>& outputs) {
  if (e.kind() == graph::ExprKind::input) return false;
  const std::vector<graph::Node*> outs = e.outputs();
  return std::all_of(outs.begin(), outs.end(), [&](const graph::Node* n) {
    return n->users().empty() && std::find(outputs.begin(), outputs.end(), n) == outputs.end();
  });
}

/// Deletes every expr of `exprs` (exprs of `g`, or null) that nothing uses, then, walking back
/// through their inputs, every expr left unused by those deletions; an expr still used stays, and
/// so does everything it reads. Returns how many exprs it deleted.
inline std::size_t erase_unused(graph::Graph& g, std::vector<graph::Expr*> exprs) {
  const std::vector<graph::Node*> outputs = g.outputs();
  std::unordered_set<const graph::Expr*> erased;  // addresses only: nothing is created meanwhile
  while (!exprs.empty()) {
    graph::Expr* e = exprs.back();
    exprs.pop_back();
    if (e == nullptr || erased.count(e) != 0 || !unused(*e, outputs)) continue;
    for (graph::Node* in : e->inputs())
      if (in->expr() != nullptr) exprs.push_back(in->expr());
    g.erase(e);
    erased.insert(e);
  }
  return erased.size();
}

/// Points every use of `from` (and the outputs) at `to`, then deletes what that left unused
/// (erase_unused from `from`'s expr); `to` takes the name `from` had (MegEngine keeps the replaced
/// node's name) unless `keep_name` or the name is still taken.
inline void replace_and_erase(graph::Graph& g, graph::Node* from, graph::Node* to, bool keep_name = false) {
  const std::string name = from->name();
  graph::Expr* replaced = from->expr();
  g.replace_all_uses(from, to);
  erase_unused(g, {replaced});
  if (!keep_name && to->name() != name && !g.names().taken(name)) to->set_name(name);
}

}  // namespace tracemod::passes
