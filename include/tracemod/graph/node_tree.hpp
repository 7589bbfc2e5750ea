// NodeTree: the nested output structure of a graph (a node, or a tuple/list/dict of such trees),
// flattened to and rebuilt from the graph's flat output list.
#pragma once

#include <tracemod/core/value.hpp>
#include <tracemod/graph/node.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tracemod::graph {

/// The nested output structure of a graph: a node, or a tuple/list/dict of such trees.
struct NodeTree {
  enum class Kind : std::uint8_t { leaf, tuple, list, dict };
  Kind kind = Kind::tuple;
  Node* node = nullptr;
  std::vector<NodeTree> children;
  std::vector<std::string> keys;  // dict only, parallel to children

  static NodeTree leaf(Node* n) { return {Kind::leaf, n, {}, {}}; }
  static NodeTree tuple(std::vector<NodeTree> c) { return {Kind::tuple, nullptr, std::move(c), {}}; }
  static NodeTree list(std::vector<NodeTree> c) { return {Kind::list, nullptr, std::move(c), {}}; }
  static NodeTree dict(std::vector<std::pair<std::string, NodeTree>> items) {
    NodeTree t{Kind::dict, nullptr, {}, {}};
    for (auto& [k, v] : items) {
      t.keys.push_back(k);
      t.children.push_back(std::move(v));
    }
    return t;
  }
  /// The leaves, depth-first.
  void flatten(std::vector<Node*>& out) const {
    if (kind == Kind::leaf) {
      out.push_back(node);
      return;
    }
    for (const NodeTree& c : children) c.flatten(out);
  }
  /// Builds the matching Value from leaf values in flatten() order.
  template <class LeafValue>
  Value unflatten(LeafValue&& leaf_value, std::size_t& next) const {
    switch (kind) {
      case Kind::leaf: return leaf_value(next++);
      case Kind::tuple:
      case Kind::list: {
        ValueList items;
        for (const NodeTree& c : children) items.push_back(c.unflatten(leaf_value, next));
        return kind == Kind::tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
      }
      case Kind::dict: {
        ValueDict items;
        for (std::size_t i = 0; i < children.size(); ++i) items.emplace_back(keys[i], children[i].unflatten(leaf_value, next));
        return Value::dict(std::move(items));
      }
    }
    return {};
  }
  /// Replaces every leaf equal to `from` by `to`.
  void replace(const Node* from, Node* to) {
    if (kind == Kind::leaf) {
      if (node == from) node = to;
      return;
    }
    for (NodeTree& c : children) c.replace(from, to);
  }
};


}  // namespace tracemod::graph
