// A TracedModule called while tracing: it is a module again. Called with tmod::Sym arguments, it
// records a call of itself, as a user module does; its callee graph is a copy of the graph it was
// traced with for those argument kinds, re-recorded expr by expr under the module being traced
// (MegEngine re-traces a TracedModule by interpreting its graph under the tracer). The copy is
// made like a trace: names come from the copied graph (inputs, getattrs, calls and renamed nodes
// keep theirs), qualnames from the new position in the module tree, ids from the new hierarchy,
// and every op and builtin module call infers its output shape again from its new inputs. A
// sub-module's call is copied in turn into a graph of that sub-module's traced copy.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/graph/recorder.hpp>
#include <tracemod/graph/sym.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tracemod {

namespace detail {

/// The traced graph of `m` for a call of these argument kinds; otherwise a graph_error naming the
/// module (`who`) and the forms it was traced for.
inline const graph::Graph& retrace_source(const TracedModule& m, const std::string& signature, const std::string& who) {
  if (const graph::Graph* g = m.graph_for_call(signature)) return *g;
  std::string forms;
  for (const std::string& f : m.traced_forms()) forms += (forms.empty() ? "forward" : ", forward") + f;
  if (forms.empty()) forms = "nothing (it has no graph)";
  throw graph_error(who + ": called with " + signature + ", but it was traced for " + forms +
                    "; call it with the argument kinds it was traced with");
}

/// `qualname` moved from the graph of qualname `from` to the one of qualname `to`.
inline std::string rebase_qualname(const std::string& qualname, const std::string& from, const std::string& to) {
  if (qualname.compare(0, from.size(), from) == 0 && (qualname.size() == from.size() || qualname[from.size()] == '.'))
    return to + qualname.substr(from.size());
  return qualname;
}

/// The node arguments of a call, in input order.
inline std::vector<graph::Node*> node_arguments(const std::vector<graph::CallArg>& args) {
  std::vector<graph::Node*> nodes;
  for (const graph::CallArg& a : args) {
    if (const auto* n = std::get_if<graph::Node*>(&a)) nodes.push_back(*n);
    if (const auto* l = std::get_if<std::vector<graph::Node*>>(&a)) nodes.insert(nodes.end(), l->begin(), l->end());
  }
  return nodes;
}

inline graph::Expr* record_traced_module_call(graph::Graph& g, graph::ModuleTracer* tracer, const TracedModule& m,
                                              graph::ModuleNode* callee, const std::vector<graph::CallArg>& args,
                                              const std::string& signature);

/// A call of `src` (an expr of a traced graph) re-recorded into `g` on the nodes `map` gives for
/// its inputs: module calls through `tracer`, op calls inferring their shapes again.
inline graph::Expr* replay_call(graph::Graph& g, graph::ModuleTracer* tracer, const graph::Expr& src,
                                const std::unordered_map<const graph::Node*, graph::Node*>& map) {
  std::vector<graph::CallArg> args = src.args();
  for (graph::CallArg& a : args) {
    if (auto* n = std::get_if<graph::Node*>(&a)) *n = map.at(*n);
    if (auto* l = std::get_if<std::vector<graph::Node*>>(&a))
      for (graph::Node*& n : *l) n = map.at(n);
  }
  if (const functional::op_entry* op = src.op()) {
    args.resize(op->operands.size());  // the rest are params, given in canonical order
    return g.create_op_call(*op, args, src.params());
  }
  const Module* m = src.callee();
  if (m == nullptr) throw graph_error("%" + std::to_string(src.id()) + " (" + src.target() + "): the called module is missing");
  auto* node = static_cast<graph::ModuleNode*>(std::get<graph::Node*>(args.front()));
  args.erase(args.begin());
  if (const auto* tm = dynamic_cast<const TracedModule*>(m))
    return record_traced_module_call(g, tracer, *tm, node, args, src.call_signature());
  if (m->is_builtin() && src.output_count() == 1)  // it infers its output's shape and dims for the new inputs
    return graph::detail::record_builtin_call_args(g, *m, node, args, src.call_signature())->expr();
  std::vector<std::pair<Shape, DType>> outs;
  for (std::size_t i = 0; i < src.output_count(); ++i) {
    const auto* t = static_cast<const graph::TensorNode*>(src.output(i));
    outs.emplace_back(t->shape(), t->dtype());
  }
  return g.create_module_call(node, args, src.call_signature(), outs);
}

/// Re-records the exprs of `src`, a graph of `m`, into `g` (whose `self` is `self_node` and whose
/// module stands for `m`), on `inputs` for src's non-self inputs; returns src's outputs mapped.
inline graph::NodeTree replay_graph(graph::Graph& g, graph::ModuleNode* self_node, graph::ModuleTracer* tracer,
                                    const graph::Graph& src, const std::vector<graph::Node*>& inputs) {
  const std::vector<graph::Node*> src_inputs = src.inputs();
  std::unordered_map<const graph::Node*, graph::Node*> map;
  map[src_inputs.front()] = self_node;
  for (std::size_t i = 1; i < src_inputs.size(); ++i) map[src_inputs[i]] = inputs.at(i - 1);
  for (const auto& up : src.expr_list_()) {
    const graph::Expr& e = *up;
    graph::Expr* copy = nullptr;
    if (e.kind() == graph::ExprKind::get_attr || e.kind() == graph::ExprKind::constant)
      copy = g.copy_expr(e, [&](const graph::Node* n) { return map.at(n); }, "");
    else
      copy = replay_call(g, tracer, e, map);
    for (std::size_t i = 0; i < e.output_count(); ++i) {
      graph::Node* out = copy->output(i);
      if (out->name() != e.output(i)->name()) g.rename_unique(out, e.output(i)->name());
      out->set_qualname(rebase_qualname(e.output(i)->qualname(), src.qualname(), g.qualname()));
      map[e.output(i)] = out;
    }
  }
  graph::NodeTree outputs = src.output_tree();
  for (const graph::Node* n : src.outputs()) outputs.replace(n, map.at(n));
  return outputs;
}

/// The tensor nodes passed for the tensor inputs of `src`, checked against their traced dtypes.
inline std::vector<graph::Node*> retrace_inputs(const graph::Graph& src, const std::vector<graph::CallArg>& args,
                                                const std::string& who) {
  const std::vector<graph::Node*> nodes = node_arguments(args);
  const std::vector<graph::Node*> want = src.inputs();
  if (nodes.size() + 1 != want.size())
    throw graph_error(who + ": " + src.name() + ".Graph takes " + std::to_string(want.size() - 1) + " tensors, got " +
                      std::to_string(nodes.size()));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i]->is_tensor()) throw graph_error(who + ": argument " + std::to_string(i) + " is a module, not a tensor");
    const DType got = static_cast<const graph::TensorNode*>(nodes[i])->dtype();
    const DType traced = static_cast<const graph::TensorNode*>(want[i + 1])->dtype();
    if (got != traced)
      throw dtype_error(who + ": input '" + want[i + 1]->name() + "' is " + std::string(dtype_name(got)) +
                        ", but " + src.name() + ".Graph was traced with " + std::string(dtype_name(traced)));
  }
  return nodes;
}

/// Records, into `g`, a call of traced module `m` (its node `callee`) with `args`: the callee graph
/// for `signature` is made once per signature by copying m's traced graph (through `tracer`, which
/// keeps it in the traced copy of m).
inline graph::Expr* record_traced_module_call(graph::Graph& g, graph::ModuleTracer* tracer, const TracedModule& m,
                                              graph::ModuleNode* callee, const std::vector<graph::CallArg>& args,
                                              const std::string& signature) {
  const std::string who = std::string(m.type_name()) + " '" + callee->qualname() + "'";
  if (tracer == nullptr)
    throw graph_error(who + ": a traced module is called on Syms while trace_module or insert_exprs records");
  const graph::Graph& src = retrace_source(m, signature, who);
  const std::vector<graph::Node*> nodes = retrace_inputs(src, args, who);
  graph::Graph* sub = tracer->find_graph(m, signature);
  if (sub == nullptr) {
    // Named after the callee node in the caller's namespace, as a user module's graph is.
    const std::string qualname = callee->qualname();
    graph::Graph& made = tracer->add_graph(m, signature, "", qualname);
    made.rename_graph(g.names().create_unique_name(qualname, &made), qualname);
    made.set_parent(&g);
    made.add_self_input("Module");
    const std::vector<graph::Node*> src_inputs = src.inputs();
    std::vector<graph::Node*> inputs;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const auto* t = static_cast<const graph::TensorNode*>(nodes[i]);
      graph::TensorNode* in = made.add_tensor_input(src_inputs[i + 1]->name(), t->shape(), t->dtype());
      in->copy_symbolic(*t);  // the caller's argument: the callee runs at what conforms to it
      inputs.push_back(in);
    }
    auto* self = static_cast<graph::ModuleNode*>(made.inputs().front());
    made.set_outputs(replay_graph(made, self, tracer, src, inputs));
    sub = &made;
  }
  graph::Expr* call = g.create_module_call(callee, args, signature, graph::detail::callee_outputs(*sub));
  const std::vector<graph::Node*> sub_outputs = sub->outputs();
  for (std::size_t i = 0; i < call->output_count(); ++i)
    static_cast<graph::TensorNode*>(call->output(i))->copy_symbolic(*static_cast<const graph::TensorNode*>(sub_outputs[i]));
  return call;
}

template <class... A>
graph::Expr* record_call_of(const TracedModule& m, graph::Recorder& r, const A&... args) {
  graph::ModuleNode* callee = r.module_node(m);
  const std::vector<graph::CallArg> call_args{graph::detail::to_arg(r, args)...};
  return record_traced_module_call(r.graph(), r.tracer(), m, callee, call_args, graph::detail::signature_of(args...));
}

/// The forward of `m` on Syms: when the recorder records m's own forward (trace_module(traced, x)),
/// m's graph is copied into the recording graph; otherwise a call of m is recorded. Returns the
/// output nodes, flattened.
template <class... A>
std::vector<graph::Node*> traced_forward(const TracedModule& m, const A&... args) {
  graph::Recorder& r = graph::Recorder::current(std::string(m.type_name()));
  if (r.module() != &m) {
    const graph::Expr* call = record_call_of(m, r, args...);
    std::vector<graph::Node*> outs;
    for (std::size_t i = 0; i < call->output_count(); ++i) outs.push_back(call->output(i));
    return outs;
  }
  const std::string who(m.type_name());
  const graph::Graph& src = retrace_source(m, graph::detail::signature_of(args...), who);
  const std::vector<graph::CallArg> call_args{graph::detail::to_arg(r, args)...};
  std::vector<graph::Node*> outs;
  replay_graph(r.graph(), r.self_node(), r.tracer(), src, retrace_inputs(src, call_args, who)).flatten(outs);
  return outs;
}

/// The single output of a call; a graph_error for another output structure.
template <class T>
T single_output(const TracedModule& m, std::vector<T> outs) {
  if (outs.size() != 1)
    throw graph_error(std::string(m.type_name()) + ": forward returns " + std::to_string(outs.size()) +
                      " tensors; a call returning one value takes a graph with one output (use forward_flat)");
  return std::move(outs.front());
}

}  // namespace detail

template <class... A>
  requires(graph::detail::involves_sym<A> || ...)
Sym TracedModule::operator()(const A&... args) const {
  return forward(args...);
}

template <class... A>
  requires(std::convertible_to<const A&, Value> && ...)
Tensor TracedModule::forward(const A&... args) const {
  const Value out = (*this)(args...);
  if (!out.is_tensor())
    throw graph_error(type_name_ + ": forward returns " + out.repr() +
                      ", not one tensor; call it with operator() for the nested value, or use forward_flat");
  return out.tensor();
}

template <class... A>
  requires(graph::detail::involves_sym<A> || ...)
Sym TracedModule::forward(const A&... args) const {
  std::vector<Sym> outs;
  for (graph::Node* n : detail::traced_forward(*this, args...)) outs.emplace_back(n);
  return detail::single_output(*this, std::move(outs));
}

template <class... A>
  requires(std::convertible_to<const A&, Value> && ...)
std::vector<Tensor> TracedModule::forward_flat(const A&... args) const {
  const std::vector<graph::NodeValue> in{graph::NodeValue(Value(args))...};
  const graph::Graph& g = graph();
  check_call_form(g, in);
  check_input_dtypes(g, in);
  std::vector<Tensor> outs;
  for (const graph::NodeValue& v : g.run(*this, in)) outs.push_back(std::get<Value>(v).tensor());
  return outs;
}

template <class... A>
  requires(graph::detail::involves_sym<A> || ...)
std::vector<Sym> TracedModule::forward_flat(const A&... args) const {
  std::vector<Sym> outs;
  for (graph::Node* n : detail::traced_forward(*this, args...)) outs.emplace_back(n);
  return outs;
}

}  // namespace tracemod
