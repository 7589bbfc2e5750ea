// tmod::to_dot(graph) (also graph.to_dot()): the graph in Graphviz's DOT language, for `dot -Tsvg`.
//
// Every graph is a cluster labelled `<name>.Graph`; inputs and the return are ellipses, exprs boxes
// labelled with their printed text. An edge carries a tensor from the expr producing it to the expr
// using it, labelled with the tensor's recorded shape (its symbolic shape when dynamic); module
// values (self, getattr of a module) travel on dashed edges. A call of a user module draws the
// callee's graph as a nested cluster at that call: the call's tensor arguments flow into the
// cluster's inputs and the cluster's return flows into the call's box, whose outputs go on to their
// users. A graph called from several places
// is drawn once per call, so the picture reads as the computation that runs.
#pragma once

#include <tracemod/graph/graph.hpp>
#include <tracemod/graph/print.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tracemod::graph {

/// Decorates the box of a call: appends label lines and DOT attributes (`style=filled, ...`). `call`
/// numbers the calls in drawing order, which is the order a run executes them (a callee's calls
/// right after the call of their module).
using DotDecorator =
    std::function<void(const Expr& e, std::size_t call, std::vector<std::string>& lines, std::string& attrs)>;

namespace detail {

/// A DOT string literal's content: quotes and backslashes escaped, tabs as spaces.
inline std::string dot_escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\t' ? ' ' : c == '\n' ? ' ' : c;
  }
  return out;
}

class DotWriter {
 public:
  explicit DotWriter(DotDecorator decorate = {}) : decorate_(std::move(decorate)) {}

  std::string write(const Graph& g) {
    out_ = "digraph \"" + dot_escape(g.name()) +
           "\" {\n"
           "  node [shape=box, fontname=\"monospace\", fontsize=10];\n"
           "  edge [fontname=\"monospace\", fontsize=9];\n";
    write_graph(g, "  ");
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  /// The DOT ids of a drawn graph's input ellipses (self first) and of its return ellipse.
  struct Drawn {
    std::vector<std::string> inputs;
    std::string ret;
  };

  void box(const std::string& indent, const std::string& id, const std::string& label, bool ellipse,
           const std::vector<std::string>& more = {}, const std::string& attrs = {}) {
    std::string text = dot_escape(label);
    for (const std::string& line : more) text += "\\n" + dot_escape(line);
    out_ += indent + id + " [label=\"" + text + "\"" + (ellipse ? ", shape=ellipse" : "") +
            (attrs.empty() ? "" : ", " + attrs) + "];\n";
  }

  /// An edge carrying node n (its shape as the label; dashed for a module).
  void edge(const std::string& indent, const std::string& from, const std::string& to, const Node* n) {
    out_ += indent + from + " -> " + to;
    if (n->is_tensor())
      out_ += " [label=\"" + static_cast<const TensorNode*>(n)->shape_text() + "\"];\n";
    else
      out_ += " [style=dashed];\n";
  }

  Drawn write_graph(const Graph& g, const std::string& indent) {
    const std::string prefix = "g" + std::to_string(next_cluster_) + "_";
    out_ += indent + "subgraph cluster_" + std::to_string(next_cluster_++) + " {\n";
    const std::string in = indent + "  ";
    out_ += in + "label=\"" + dot_escape(g.name()) + ".Graph\";\n";
    std::unordered_map<const Node*, std::string> producer;
    Drawn drawn;
    for (const Node* n : g.inputs()) {
      const std::string id = prefix + "e" + std::to_string(n->expr()->id());
      box(in, id, to_string(*n->expr()), true);
      producer[n] = id;
      drawn.inputs.push_back(id);
    }
    for (const auto& up : g.expr_list_()) {
      const Expr& e = *up;
      const std::string id = prefix + "e" + std::to_string(e.id());
      std::vector<std::string> more;
      std::string attrs;
      if (e.is_call() && decorate_) decorate_(e, calls_, more, attrs);
      if (e.is_call()) ++calls_;
      box(in, id, to_string(e), false, more, attrs);
      const std::vector<Node*>& inputs = e.inputs();
      if (const Graph* sub = e.graph()) {
        const Drawn callee = write_graph(*sub, in);
        edge(in, producer.at(inputs.front()), id, inputs.front());
        for (std::size_t i = 1; i < inputs.size() && i < callee.inputs.size(); ++i)
          edge(in, producer.at(inputs[i]), callee.inputs[i], inputs[i]);
        for (const Node* out : e.outputs()) edge(in, callee.ret, id, out);
      } else {
        for (const Node* n : inputs) edge(in, producer.at(n), id, n);
      }
      for (const Node* out : e.outputs()) producer[out] = id;
    }
    drawn.ret = prefix + "return";
    box(in, drawn.ret, "return " + tree_text(g.output_tree(), NodeFormat::name), true);
    for (const Node* out : g.outputs()) edge(in, producer.at(out), drawn.ret, out);
    out_ += indent + "}\n";
    return drawn;
  }

  std::string out_;
  int next_cluster_ = 0;
  DotDecorator decorate_;
  std::size_t calls_ = 0;
};

}  // namespace detail

/// The graph and every graph it calls in Graphviz's DOT language (see the top of this file).
inline std::string to_dot(const Graph& g) { return detail::DotWriter{}.write(g); }
/// to_dot with each call's box decorated (extra label lines, colours) by `decorate`.
inline std::string to_dot(const Graph& g, DotDecorator decorate) { return detail::DotWriter{std::move(decorate)}.write(g); }

inline std::string Graph::to_dot() const { return graph::to_dot(*this); }

}  // namespace tracemod::graph

namespace tracemod {
using graph::to_dot;
}  // namespace tracemod
