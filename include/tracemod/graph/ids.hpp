// Node and expr ids: one allocator hands them out. The next free ids of a hierarchy are counted by
// its top graph's owner (TracedModule's total_ids, MegEngine's _total_ids) when it keeps a count.
#pragma once

#include <tracemod/graph/expr.hpp>
#include <tracemod/graph/node.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace tracemod::graph {

class IdAllocator {
 public:
  using ids = std::pair<std::int64_t, std::int64_t>;  // (next node id, next expr id)

  explicit IdAllocator(ids next) noexcept : next_(next) {}

  /// Counts on from the next free ids of the hierarchy `g` belongs to: its top owner's count when
  /// that count is past `g`'s own ids (O(size of g)), else a scan of the whole hierarchy.
  [[nodiscard]] static IdAllocator for_hierarchy(Graph& g);

  /// Renumbers every expr and node of the hierarchy under `root` in recursive execution order;
  /// returns the count (the next free ids).
  static ids renumber(Graph& root);

  /// Gives `e` the next expr id and its outputs the next node ids.
  void number(Expr& e) noexcept {
    e.id_ = next_.second++;
    for (const auto& n : e.outputs_) n->id_ = next_.first++;
  }
  /// Records the ids handed out in the count of the hierarchy `g` belongs to (if its top keeps one).
  void commit(Graph& g) const noexcept;
  [[nodiscard]] ids next() const noexcept { return next_; }

  /// Gives a node or an expr a stored id (loading a saved graph; checks keep ids unique).
  static void assign(Node& n, std::int64_t id) noexcept { n.id_ = id; }
  static void assign(Expr& e, std::int64_t id) noexcept { e.id_ = id; }

 private:
  static ids* count_of(Graph& g) noexcept;

  ids next_;
};

}  // namespace tracemod::graph

// The definitions need the whole Graph; graph.hpp includes this header at its end, after the class.
#include <tracemod/graph/graph.hpp>

namespace tracemod::graph {

inline IdAllocator IdAllocator::for_hierarchy(Graph& g) {
  std::int64_t local_node = -1, local_expr = -1;
  for (const Expr* e : g.exprs(false)) {
    local_expr = std::max(local_expr, e->id());
    for (const Node* n : e->outputs()) local_node = std::max(local_node, n->id());
  }
  if (const ids* count = count_of(g); count != nullptr && count->first > local_node && count->second > local_expr)
    return IdAllocator(*count);
  ids next{0, 0};
  for (const Expr* e : root_graph(g).exprs(true)) {
    next.second = std::max(next.second, e->id() + 1);
    for (const Node* n : e->outputs()) next.first = std::max(next.first, n->id() + 1);
  }
  return IdAllocator(next);
}

inline IdAllocator::ids IdAllocator::renumber(Graph& root) {
  IdAllocator a({0, 0});
  for (Expr* e : root.exprs(true)) a.number(*e);
  return a.next();
}

inline void IdAllocator::commit(Graph& g) const noexcept {
  if (ids* count = count_of(g)) *count = next_;
}

inline IdAllocator::ids* IdAllocator::count_of(Graph& g) noexcept {
  auto* holder = dynamic_cast<GraphHolder*>(root_graph(g).owner());
  return holder != nullptr ? holder->id_count() : nullptr;
}

}  // namespace tracemod::graph
