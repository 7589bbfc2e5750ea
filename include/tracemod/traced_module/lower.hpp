// tmod::to_traced_module(typed_graph): lowers a graph of the compile-time tracer into the
// TracedModule that tmod::trace_module builds for the same module: the same module tree, graphs,
// exprs, names and ids, so both print, run and check alike.
//
// A typed graph is a tree in which a call used by several consumers appears once per use, each copy
// carrying the call's id; ids number a graph's calls in the order they ran. Lowering collects each
// id's call once, then records the calls in id order through the run-time tracer's own recorder, so
// getattrs and Constants (deduplicated by buffer) land right before their first use, as when
// trace_module records. A user module's call lowers its typed sub-graph into the module's graph for
// that call signature; a later call with the same signature reuses it (its own copy of the typed
// sub-graph is not looked at).
//
// Only graphs traced from a tmod::Module lower: the module tree comes from it. A graph traced from a
// plain callable (a lambda) has no module, so lowering throws graph_error.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/recorder.hpp>
#include <tracemod/graph/sym.hpp>
#include <tracemod/nn/module.hpp>
#include <tracemod/trace/typed_graph.hpp>
#include <tracemod/trace/node.hpp>
#include <tracemod/traced_module/trace_module.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod {

namespace detail {

template <class N>
inline constexpr bool is_typed_call_v = false;
template <class Op, class P, class S, class... A>
inline constexpr bool is_typed_call_v<trace::op_node<Op, P, S, A...>> = true;
template <class M, class... A>
inline constexpr bool is_typed_call_v<trace::builtin_call_node<M, A...>> = true;
template <class M, class G, class... A>
inline constexpr bool is_typed_call_v<trace::module_call_node<M, G, A...>> = true;

template <class N>
inline constexpr bool is_typed_output_v = false;
template <std::size_t I, class Call>
inline constexpr bool is_typed_output_v<trace::output_node<I, Call>> = true;

template <class N>
inline constexpr bool is_typed_input_v = false;
template <std::size_t I, class S>
inline constexpr bool is_typed_input_v<trace::input_node<I, S>> = true;

template <class N>
inline constexpr bool is_typed_attr_v = false;
template <class T>
inline constexpr bool is_typed_attr_v<trace::attr_node<T>> = true;

/// The constant a scalar leaf records: the number with its C++ type, as trace_module records it.
inline Value scalar_value(const trace::scalar_leaf& s) {
  switch (s.type) {
    case trace::scalar_leaf::source::integer: return Value(static_cast<std::int64_t>(s.written));
    case trace::scalar_leaf::source::real: return Value(s.written);
    case trace::scalar_leaf::source::single: break;
  }
  return Value(s.value);
}

/// The call signature of recorded module-call arguments, as trace_module writes it ("(Tensor, 2)").
inline std::string signature_of_args(const std::vector<graph::CallArg>& args, const std::string& where) {
  std::string s;
  for (const graph::CallArg& a : args) {
    s += s.empty() ? "" : ", ";
    if (std::holds_alternative<graph::Node*>(a))
      s += "Tensor";
    else if (const Value* v = std::get_if<Value>(&a))
      s += graph::detail::signature_part(*v);
    else
      throw graph_error(where + ": a list of tensors cannot be an argument of a module call");
  }
  return "(" + s + ")";
}

/// Lowers one typed graph (the traced module's, or a user module's for one call signature) into a
/// runtime graph that already has its inputs.
class graph_lowering {
 public:
  /// `inputs`: what each input_node of the typed graph stands for (a node, or the constant a user
  /// module was called with).
  graph_lowering(graph::Graph& g, const Module& m, TraceSession& session, std::vector<graph::CallArg> inputs)
      : graph_(g),
        session_(session),
        recorder_(g, static_cast<graph::ModuleNode*>(g.inputs().front()), &m, &session, &session.index_of(m)),
        inputs_(std::move(inputs)) {}

  template <class G>
  void run(const G& typed) {
    calls_.assign(typed.call_count(), {});
    outputs_.assign(typed.call_count(), {});
    if constexpr (G::multiple_outputs)
      std::apply([&](const auto&... o) { (collect(o), ...); }, typed.output());
    else
      collect(typed.output());
    for (const auto& emit : calls_)
      if (emit) emit();
    if constexpr (G::multiple_outputs)
      graph_.set_outputs(graph::NodeTree::tuple(
          std::apply([&](const auto&... o) { return std::vector<graph::NodeTree>{output_leaf(o)...}; }, typed.output())));
    else
      graph_.set_outputs(output_leaf(typed.output()));
  }

 private:
  std::string where() const { return "to_traced_module(" + graph_.name() + ".Graph)"; }

  /// Registers every call the subtree of n reaches, each id once (a shared call's operands are
  /// walked once too, so a DAG costs its size, not the size of its unfolded tree).
  template <class N>
  void collect(const N& n) {
    if constexpr (is_typed_call_v<N>) {
      if (n.id >= calls_.size())
        throw graph_error(where() + ": call id " + std::to_string(n.id) + " is out of range (the graph has " +
                          std::to_string(calls_.size()) + " calls)");
      if (calls_[n.id]) return;
      std::apply([&](const auto&... a) { (collect(a), ...); }, n.args);
      calls_[n.id] = [this, &n] { emit(n); };
    } else if constexpr (is_typed_output_v<N>) {
      collect(n.call);
    } else if constexpr (trace::detail::is_tuple_v<N>) {
      std::apply([&](const auto&... a) { (collect(a), ...); }, n);
    }
  }

  /// The argument a typed operand records as (recording getattrs and Constants on first use).
  template <class N>
  graph::CallArg operand(const N& n) {
    if constexpr (is_typed_call_v<N>) {
      return called(n.id).at(0);
    } else if constexpr (is_typed_output_v<N>) {
      return called(n.call.id).at(N::index);
    } else if constexpr (is_typed_input_v<N>) {
      return inputs_.at(N::index);
    } else if constexpr (is_typed_attr_v<N>) {
      return recorder_.tensor_node(n.tensor);
    } else if constexpr (std::same_as<N, trace::constant_node>) {
      return recorder_.tensor_node(n.value);
    } else if constexpr (std::same_as<N, trace::scalar_leaf>) {
      return scalar_value(n);
    } else if constexpr (is_constant_scalar_v<N>) {
      return graph::detail::constant_value(n);
    } else if constexpr (std::same_as<N, none_t>) {
      return Value(none);
    } else {  // a list operand (concat's inputs)
      return std::apply([&](const auto&... e) { return std::vector<graph::Node*>{node_of(operand(e))...}; }, n);
    }
  }

  template <class Args>
  std::vector<graph::CallArg> operands(const Args& args) {
    std::vector<graph::CallArg> v;
    std::apply([&](const auto&... a) { (v.push_back(operand(a)), ...); }, args);
    return v;
  }

  graph::Node* node_of(const graph::CallArg& a) const {
    if (const auto* n = std::get_if<graph::Node*>(&a)) return *n;
    throw graph_error(where() + ": a number stands where a tensor is needed (a list operand, or an output)");
  }

  const std::vector<graph::Node*>& called(std::uint32_t id) const {
    if (outputs_.at(id).empty())
      throw graph_error(where() + ": call " + std::to_string(id) + " is used before it was recorded");
    return outputs_[id];
  }

  template <class N>
  graph::NodeTree output_leaf(const N& n) {
    return graph::NodeTree::leaf(node_of(operand(n)));
  }

  template <class Op, class P, class S, class... A>
  void emit(const trace::op_node<Op, P, S, A...>& n) {
    outputs_[n.id] = {graph::detail::record_op_call<Op>(recorder_, n.params, operands(n.args))};
  }

  template <class M, class... A>
  void emit(const trace::builtin_call_node<M, A...>& n) {
    const std::vector<graph::CallArg> args = operands(n.args);
    const std::string signature = signature_of_args(args, where());
    if constexpr (std::same_as<M, TracedModule>) {
      if (recorder_.module() == n.module) {  // symbolic_trace(traced, spec): its graph, copied in place
        const std::string who(n.module->type_name());
        const graph::Graph& src = retrace_source(*n.module, signature, who);
        std::vector<graph::Node*> outs;
        const std::vector<graph::Node*> inputs = retrace_inputs(src, args, who);
        replay_graph(graph_, recorder_.self_node(), recorder_.tracer(), src, inputs).flatten(outs);
        outputs_[n.id] = std::move(outs);
      } else {  // a call of its traced copy, its graph copied under the call
        outputs_[n.id] = {record_traced_module_call(graph_, recorder_.tracer(), *n.module,
                                                    recorder_.module_node(*n.module), args, signature)
                              ->output(0)};
      }
    } else {
      outputs_[n.id] = {graph::detail::record_builtin_call_args(graph_, *n.module, recorder_.module_node(*n.module),
                                                                args, signature)};
    }
  }

  template <class M, class G, class... A>
  void emit(const trace::module_call_node<M, G, A...>& n) {
    const Module& m = *n.module;
    graph::ModuleNode* callee = recorder_.module_node(m);
    const std::vector<graph::CallArg> args = operands(n.args);
    const std::string signature = signature_of_args(args, where());
    graph::Graph* sub = session_.find_graph(m, signature);
    if (sub == nullptr) {
      graph::Graph& g = graph::detail::add_callee_graph(recorder_, session_, m, *callee, signature);
      std::vector<graph::CallArg> sub_inputs;
      for (const graph::CallArg& a : args) {
        if (const auto* node = std::get_if<graph::Node*>(&a)) {
          const auto* t = static_cast<const graph::TensorNode*>(*node);
          sub_inputs.emplace_back(g.add_tensor_input("x", t->shape(), t->dtype()));
        } else {
          sub_inputs.push_back(a);
        }
      }
      graph_lowering(g, m, session_, std::move(sub_inputs)).run(n.graph);
      sub = &g;
    }
    outputs_[n.id] = graph_.create_module_call(callee, args, signature, graph::detail::callee_outputs(*sub))->outputs();
  }

  graph::Graph& graph_;
  TraceSession& session_;
  graph::Recorder recorder_;
  std::vector<graph::CallArg> inputs_;
  std::vector<std::function<void()>> calls_;         // by call id
  std::vector<std::vector<graph::Node*>> outputs_;  // by call id, once recorded
};

}  // namespace detail

/// The TracedModule of a typed graph traced from a tmod::Module: what trace_module(module, x) returns
/// for inputs of the spec's shapes (without trace_module's comparison with eager mode: a typed graph
/// holds no example values). Inputs are named by their spec (`x` when unnamed). Throws graph_error
/// for a graph traced from a plain callable.
template <class Out, class... Inputs>
TracedModule to_traced_module(const trace::typed_graph<Out, Inputs...>& typed) {
  const Module* module = typed.module();
  if (module == nullptr)
    throw graph_error(
        "to_traced_module: this typed graph was traced from a plain callable, which has no module to build the "
        "TracedModule's attributes from; trace a tmod::Module (symbolic_trace(module, spec)) instead");
  detail::TraceSession session(*module);
  const std::unique_ptr<TracedModule> root = session.release_root();
  TracedModule& top = *root;
  graph::Graph& g = detail::add_top_graph(top);
  std::vector<graph::CallArg> inputs;
  std::apply(
      [&](const auto&... in) {
        (inputs.emplace_back(g.add_tensor_input(in.name.empty() ? "x" : in.name, in.shape, DType::float32)), ...);
      },
      typed.inputs());
  detail::graph_lowering(g, *module, session, std::move(inputs)).run(typed);
  detail::finish_trace(top);
  return std::move(top);
}

}  // namespace tracemod
