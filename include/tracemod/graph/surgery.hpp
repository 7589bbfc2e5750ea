// Graph surgery (MegEngine's InternalGraph.replace_node, add_input_node, add_output_node,
// reset_outputs, Expr.set_args_kwargs): editing a traced graph in place, with every argument checked
// before anything changes. New ids come from IdAllocator. Recording new exprs (insert_exprs) goes
// through the tracer: traced_module/surgery.hpp.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/check.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/graph/ids.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

namespace tracemod::graph {

inline void check(const Graph& g);  // graph/check.hpp (which may be the header being included)

namespace detail {

/// Debug builds verify every invariant of the whole hierarchy after each surgery call.
inline void check_after_surgery([[maybe_unused]] Graph& g) {
#ifndef NDEBUG
  check(root_graph(g));
#endif
}

/// Throws graph_error unless `n` is a node of `g`.
inline void require_node_of(const Graph& g, const Node* n, std::string_view what) {
  if (n == nullptr) throw graph_error(std::string(what) + ": a node is null");
  if (n->top_graph() != &g)
    throw graph_error(std::string(what) + ": node '" + n->name() + "' (%" + std::to_string(n->id()) + ") belongs to " +
                      n->top_graph()->name() + ".Graph, not to " + g.name() + ".Graph");
}

/// Throws graph_error naming the tensor node when `n` is a module node: graph outputs are tensors.
inline void require_tensor_output(const Node* n, std::string_view what) {
  if (!n->is_tensor())
    throw graph_error(std::string(what) + ": node '" + n->name() + "' (%" + std::to_string(n->id()) + ") is a " +
                      static_cast<const ModuleNode*>(n)->module_type() + " module node; graph outputs are tensor nodes");
}

inline std::string shape_text(const Node* n) {
  const auto* t = static_cast<const TensorNode*>(n);
  return t->shape().to_string() + " " + std::string(dtype_name(t->dtype()));
}

/// Input and output surgery changes the module's call interface: only the top graph's is free.
inline void require_top_graph(const Graph& g, std::string_view what) {
  if (g.top_graph() != nullptr)
    throw graph_error(std::string(what) + " only supports the top graph; " + g.name() + ".Graph is called from " +
                      g.top_graph()->name() + ".Graph");
}

}  // namespace detail

/// MegEngine's replace_node: for each (old, new) pair, the users of `old` that come after the
/// producer of `new` (and that `new` does not depend on) use `new` instead, and outputs equal to
/// `old` become `new`. Nothing is deleted (compile() does). Every pair is checked before anything
/// changes: both nodes of `g`, of the same kind.
inline void replace_node(Graph& g, const std::vector<std::pair<Node*, Node*>>& repl) {
  for (const auto& [from, to] : repl) {
    detail::require_node_of(g, from, "replace_node");
    detail::require_node_of(g, to, "replace_node");
    if (from->kind() != to->kind())
      throw graph_error("replace_node: node '" + from->name() + "' is a " + (from->is_tensor() ? "tensor" : "module") +
                        " node but its replacement '" + to->name() + "' is not");
    // Users were recorded (their output shapes inferred) for the old node's shape and dtype, and so
    // were the calls of a sub-graph; only the top graph's outputs may change shape.
    const bool used = !from->users().empty();
    if (from->is_tensor() && (used || g.top_graph() != nullptr) && detail::shape_text(from) != detail::shape_text(to))
      throw graph_error("replace_node: node '" + from->name() + "' is " + detail::shape_text(from) +
                        " but its replacement '" + to->name() + "' is " + detail::shape_text(to) +
                        (used ? std::string()
                              : " (in " + g.name() + ".Graph, whose callers were recorded for its old shapes)"));
  }
  for (const auto& [from, to] : repl) {
    // Exprs `to` depends on: rewiring them would make a cycle.
    std::unordered_set<const Expr*> deps;
    std::vector<const Node*> work{to};
    while (!work.empty()) {
      const Expr* p = work.back()->expr();
      work.pop_back();
      if (p == nullptr || p->kind() == ExprKind::input || !deps.insert(p).second) continue;
      for (const Node* in : p->inputs()) work.push_back(in);
    }
    const Expr* producer = to->expr();
    const bool from_input = producer->kind() == ExprKind::input;
    const std::size_t index = from_input ? 0 : g.position(producer);
    std::vector<Expr*> users = from->users();
    users.erase(std::unique(users.begin(), users.end()), users.end());
    for (Expr* u : users) {
      if (!from_input && g.position(u) <= index) continue;
      if (deps.count(u) != 0) continue;
      g.rewire(u, from, to);
    }
    NodeTree tree = g.output_tree();
    tree.replace(from, to);
    g.set_outputs(std::move(tree));
  }
  g.changed();
  detail::check_after_surgery(g);
}

/// Replaces every argument of a functional or tensor-method call (MegEngine's set_args_kwargs):
/// `args` are positional (operands, then positional params), `kwargs` name operands or params;
/// params left out take their defaults. The new operands must be nodes of the expr's graph produced
/// before it, and the output's shape and dtype must stay as they are (its users were recorded with
/// them). A module call's arguments select its callee graph, so it is refused.
inline void set_args_kwargs(Expr& e, const std::vector<CallArg>& args,
                            const std::vector<std::pair<std::string, CallArg>>& kwargs = {}) {
  const std::string where = "set_args_kwargs(%" + std::to_string(e.id()) + " " + e.target() + ")";
  if (e.op() == nullptr)
    throw graph_error(where + ": only functional and tensor-method calls can take new arguments" +
                      (e.is_module_call() ? std::string("; a module call's arguments select its callee graph") : ""));
  const functional::op_entry& op = *e.op();
  Graph& g = *e.top_graph();
  const std::size_t n_operands = op.operands.size();
  if (args.size() > n_operands + op.positional_param_count())
    throw graph_error(where + ": " + std::to_string(args.size()) + " positional arguments, at most " +
                      std::to_string(n_operands + op.positional_param_count()));
  std::vector<std::optional<CallArg>> canon(n_operands + op.params.size());
  for (std::size_t i = 0; i < args.size(); ++i) canon[i] = args[i];
  for (const auto& [key, value] : kwargs) {
    std::size_t i = 0;
    while (i < canon.size() && (i < n_operands ? op.operands[i].name : std::string_view(op.params[i - n_operands].name)) != key) ++i;
    if (i == canon.size()) throw graph_error(where + ": no argument named '" + key + "'");
    if (canon[i]) throw graph_error(where + ": argument '" + key + "' is given twice");
    canon[i] = value;
  }
  std::vector<CallArg> operands;
  std::vector<Value> params;
  for (std::size_t i = 0; i < canon.size(); ++i) {
    if (i < n_operands) {
      if (!canon[i]) throw graph_error(where + ": operand '" + std::string(op.operands[i].name) + "' is missing");
      operands.push_back(*canon[i]);
    } else if (!canon[i]) {
      params.push_back(op.params[i - n_operands].default_value);
    } else if (const Value* v = std::get_if<Value>(&*canon[i])) {
      params.push_back(*v);
    } else {
      throw graph_error(where + ": parameter '" + op.params[i - n_operands].name + "' must be a constant, not a node");
    }
  }
  for (const CallArg& a : operands) {
    std::vector<Node*> nodes;
    if (const auto* n = std::get_if<Node*>(&a)) nodes.push_back(*n);
    if (const auto* l = std::get_if<std::vector<Node*>>(&a)) nodes = *l;
    for (const Node* n : nodes) {
      detail::require_node_of(g, n, where);
      const Expr* p = n->expr();
      if (p->kind() != ExprKind::input && g.position(p) >= g.position(&e))
        throw graph_error(where + ": node '" + n->name() + "' is produced after this expr");
    }
  }
  // A scratch call validates operands and params and infers the new output; it is removed again.
  Expr* scratch = g.create_op_call(op, operands, params);
  const auto* before = static_cast<const TensorNode*>(e.output());
  const auto* after = static_cast<const TensorNode*>(scratch->output());
  if (after->shape() != before->shape() || after->dtype() != before->dtype()) {
    const std::string why = where + ": the output would change from " + before->shape().to_string() + " to " +
                            after->shape().to_string();
    g.erase(scratch);
    throw graph_error(why);
  }
  g.take_arguments(e, *scratch);
  detail::check_after_surgery(g);
}

/// Adds a tensor input to the top graph: the module then takes one more argument.
inline TensorNode* add_input_node(Graph& g, const Shape& shape, DType dtype, std::string_view name) {
  detail::require_top_graph(g, "add_input_node");
  IdAllocator ids = IdAllocator::for_hierarchy(g);
  TensorNode* n = g.add_tensor_input(name, shape, dtype);
  ids.number(*n->expr());
  ids.commit(g);
  detail::check_after_surgery(g);
  return n;
}

/// Adds a tensor input with symbolic dims to the top graph (`{DimExpr::symbol("N"), 4}`: a dynamic
/// batch), at the example extents `example` the graph's shapes are inferred at: the module then
/// takes one more argument, of any extent where its dim is a symbol. Each dim is a constant equal to
/// its example extent or a symbol; a symbol that other inputs use must have their example extent.
/// value_error naming the input otherwise, with the graph unchanged.
inline TensorNode* add_input_node(Graph& g, const Dims& dims, const Shape& example, DType dtype, std::string_view name) {
  detail::require_top_graph(g, "add_input_node");
  const auto fail = [&](const std::string& why) {
    return value_error("add_input_node: input '" + std::string(name) + "' " + to_string(dims) + " at example shape " +
                       example.to_string() + ": " + why);
  };
  if (dims.size() != example.rank()) throw fail("the ranks differ");
  for (std::size_t a = 0; a < dims.size(); ++a) {
    if (dims[a].is_constant() && dims[a].value() != example[a])
      throw fail("axis " + std::to_string(a) + " is the constant " + dims[a].to_string());
    if (!dims[a].is_constant() && !dims[a].is_symbol())
      throw fail("axis " + std::to_string(a) + " is the expression " + dims[a].to_string() + "; an input's dims are symbols or constants");
    if (!dims[a].is_symbol()) continue;
    for (const Node* in : g.inputs()) {
      if (!in->is_tensor()) continue;
      const auto* t = static_cast<const TensorNode*>(in);
      const Dims d = t->dims();
      for (std::size_t b = 0; b < d.size(); ++b)
        if (d[b] == dims[a] && t->shape()[b] != example[a])
          throw fail("symbol " + dims[a].name() + " is " + std::to_string(t->shape()[b]) + " in input '" + t->name() + "' " +
                     t->shape().to_string());
    }
  }
  TensorNode* n = add_input_node(g, example, dtype, name);
  n->set_dims(dims);
  return n;
}

/// Appends an output to the top graph: the outputs become `(old outputs, node)`.
inline void add_output_node(Graph& g, Node* n) {
  detail::require_top_graph(g, "add_output_node");
  detail::require_node_of(g, n, "add_output_node");
  detail::require_tensor_output(n, "add_output_node");
  g.set_outputs(NodeTree::tuple({g.output_tree(), NodeTree::leaf(n)}));
  detail::check_after_surgery(g);
}

/// Replaces the top graph's outputs by a nested structure of its nodes.
inline void reset_outputs(Graph& g, NodeTree outputs) {
  detail::require_top_graph(g, "reset_outputs");
  std::vector<Node*> leaves;
  outputs.flatten(leaves);
  for (const Node* n : leaves) {
    detail::require_node_of(g, n, "reset_outputs");
    detail::require_tensor_output(n, "reset_outputs");
  }
  g.set_outputs(std::move(outputs));
  detail::check_after_surgery(g);
}

// DESIGN.md's member spelling of the same operations.
template <class Scope>
Scope Graph::insert_exprs(const Expr* after) {
  return Scope(*this, after);
}
inline void Graph::replace_node(const std::vector<std::pair<Node*, Node*>>& repl) { graph::replace_node(*this, repl); }
inline TensorNode* Graph::add_input_node(const Shape& shape, DType dtype, std::string_view name) {
  return graph::add_input_node(*this, shape, dtype, name);
}
inline void Graph::add_output_node(Node* node) { graph::add_output_node(*this, node); }
inline void Graph::reset_outputs(NodeTree outputs) { graph::reset_outputs(*this, std::move(outputs)); }

}  // namespace tracemod::graph
