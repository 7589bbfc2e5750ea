// MegEngine's text format of graphs, exprs and nodes:
//
//   SimpleModule.Graph (self, x) {
//   <TAB>%2:<TAB>const_tensor = Constant(Tensor) -> (Tensor)
//   <TAB>%3:<TAB>add_out = x.__add__(const_tensor, )
//   <TAB>return add_out
//   }
//
// Argument lists are `", ".join([args, kwargs])` (hence the trailing ", "), keyword arguments are
// sorted by name, a getattr or constant shows its type. An input with dynamic dims shows its symbolic
// shape: `Net.Graph (self, x: (N, 3, H, W))`. An output that carries qparams (quant::annotate_qparams)
// ends its expr's line with `  # relu_out: quint8(scale=0.0235, zero_point=12)`.
// tmod::format_ids(g) prints nodes as %3_add_out.
#pragma once

#include <tracemod/graph/graph.hpp>

#include <ostream>
#include <sstream>
#include <string>
#include <variant>

namespace tracemod::graph {

/// How nodes are written: by name (`add_out`) or with their id (`%3_add_out`).
enum class NodeFormat : std::uint8_t { name, id };

namespace detail {

inline std::string node_text(const Node* n, NodeFormat f) {
  if (n->name().empty()) return "%" + std::to_string(n->id());
  return f == NodeFormat::id ? "%" + std::to_string(n->id()) + "_" + n->name() : n->name();
}

inline std::string arg_text(const CallArg& a, NodeFormat f) {
  if (const auto* n = std::get_if<Node*>(&a)) return node_text(*n, f);
  if (const auto* l = std::get_if<std::vector<Node*>>(&a)) {
    std::string s = "[";
    for (std::size_t i = 0; i < l->size(); ++i) s += (i ? ", " : "") + node_text((*l)[i], f);
    return s + "]";
  }
  return std::get<Value>(a).repr();
}

/// The output leaves, depth-first, as MegEngine prints a graph's `return` (its outputs are the
/// flattened nodes; the nesting lives only in the output definition).
inline std::string tree_text(const NodeTree& t, NodeFormat f) {
  std::vector<Node*> leaves;
  t.flatten(leaves);
  std::string s;
  for (std::size_t i = 0; i < leaves.size(); ++i) s += (i ? ", " : "") + node_text(leaves[i], f);
  return s;
}

inline std::string type_text(const Node* n) {
  return n->is_tensor() ? "Tensor" : static_cast<const ModuleNode*>(n)->module_type();
}

/// The qparams of e's outputs that carry them: `  # relu_out: quint8(scale=0.0235, zero_point=12)`.
inline std::string qparams_text(const Expr& e, NodeFormat f) {
  std::string s;
  for (std::size_t i = 0; i < e.output_count(); ++i)
    if (const auto* t = dynamic_cast<const TensorNode*>(e.output(i)); t != nullptr && t->qparams())
      s += "  # " + node_text(t, f) + ": " + t->qparams()->dtype_meta + "(scale=" + repr_real(t->qparams()->scale) +
           ", zero_point=" + std::to_string(t->qparams()->zero_point) + ")";
  return s;
}

}  // namespace detail

/// One expr, without the leading TAB: `%3:\tadd_out = x.__add__(1, )`.
inline std::string to_string(const Expr& e, NodeFormat f = NodeFormat::name) {
  std::string s = "%" + std::to_string(e.id()) + ":\t";
  std::string outs;
  for (std::size_t i = 0; i < e.output_count(); ++i) outs += (i ? ", " : "") + detail::node_text(e.output(i), f);
  switch (e.kind()) {
    case ExprKind::input: return s + outs + " = Input()";
    case ExprKind::constant:
      return s + outs + " = Constant(" + (e.const_module() != nullptr ? "Module" : "Tensor") + ") -> (" +
             detail::type_text(e.output()) + ")";
    case ExprKind::get_attr:
      return s + outs + " = getattr(" + detail::node_text(e.inputs().front(), f) + ", \"" + e.name() + "\") -> (" +
             detail::type_text(e.output()) + ")";
    case ExprKind::call_function:
    case ExprKind::call_method: break;
  }
  std::vector<CallArg> args = e.args();
  std::string callee;
  std::size_t first = 0;
  if (const functional::op_entry* op = e.op(); op != nullptr && op->callee_text) {
    // The params are part of the callee's text: only the operands are printed as arguments.
    std::vector<Value> params;
    for (std::size_t i = op->operands.size(); i < args.size(); ++i) params.push_back(std::get<Value>(args[i]));
    for (const auto& kv : e.kwargs()) params.push_back(std::get<Value>(kv.second));
    callee = op->callee_text(op->make_params(params).get());
    args.resize(op->operands.size());
  } else if (e.kind() == ExprKind::call_method) {
    callee = detail::arg_text(args.front(), f);
    if (!e.is_module_call()) callee += "." + e.target();
    first = 1;
  } else {
    callee = e.target();
  }
  std::string a;
  for (std::size_t i = first; i < args.size(); ++i) a += (i > first ? ", " : "") + detail::arg_text(args[i], f);
  // A callee that names its inputs x0, x1, ... takes them as one list; they print as arguments.
  if (args.size() == 1 && e.op() != nullptr && e.op()->callee_text)
    if (const auto* l = std::get_if<std::vector<Node*>>(&args.front())) {
      a.clear();
      for (std::size_t i = 0; i < l->size(); ++i) a += (i ? ", " : "") + detail::node_text((*l)[i], f);
    }
  std::string k;
  if (e.op() == nullptr || !e.op()->callee_text)
    for (const auto& [name, v] : e.kwargs()) k += (k.empty() ? "" : ", ") + name + "=" + detail::arg_text(v, f);
  if (e.output_count() > 0) s += outs + " = ";
  return s + callee + "(" + a + ", " + k + ")" + detail::qparams_text(e, f);
}

/// The whole graph in MegEngine's format.
inline std::string to_string(const Graph& g, NodeFormat f = NodeFormat::name) {
  std::string ins;
  const auto inputs = g.inputs();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    ins += (i ? ", " : "") + detail::node_text(inputs[i], f);
    // A dynamic input shows its symbolic shape: the graph runs at every shape it describes.
    if (const auto* t = dynamic_cast<const TensorNode*>(inputs[i]); t != nullptr && t->is_dynamic()) ins += ": " + t->shape_text();
  }
  std::string body;
  for (const auto& e : g.expr_list_()) {
    body += '\t';  // appended piecewise: g++ 12 misreports -Wrestrict on "literal" + std::string&&
    body += to_string(*e, f);
    body += '\n';
  }
  if (body.empty()) body = "\t\n";
  return g.name() + ".Graph (" + ins + ") {\n" + body + "\treturn " + detail::tree_text(g.output_tree(), f) +
         "\n}";
}

inline std::ostream& operator<<(std::ostream& os, const Graph& g) { return os << to_string(g); }
inline std::ostream& operator<<(std::ostream& os, const Expr& e) { return os << to_string(e); }
inline std::ostream& operator<<(std::ostream& os, const Node& n) { return os << detail::node_text(&n, NodeFormat::name); }

/// MegEngine's "{:i}".format(graph): nodes printed as %<id>_<name>.
inline std::string format_ids(const Graph& g) { return to_string(g, NodeFormat::id); }

}  // namespace tracemod::graph

namespace tracemod {
using graph::format_ids;
}  // namespace tracemod

// Graph::to_dot() draws exprs with this printer; defined here so that every user of Graph has it.
#include <tracemod/graph/dot.hpp>
