// A TracedModule called with the compile-time tracer's typed symbolic tensors (tmod::symbolic_trace):
// one opaque call node of the typed graph, as a builtin module's call is. Its output shape comes
// from the traced graph: the graph's output shape when the graph is static (the arguments must have
// the traced shapes), its output dims evaluated at the arguments' extents when it was traced with
// dynamic dims (the arguments must conform). Evaluating the typed graph runs the traced module on
// tensors; to_traced_module lowers the node into a call of the module's traced copy, the graph
// copied as trace_module copies it (traced_module/retrace.hpp).
#pragma once

#include <tracemod/core/dim.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/trace/apply.hpp>
#include <tracemod/trace/context.hpp>
#include <tracemod/trace/node.hpp>
#include <tracemod/traced_module/retrace.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tracemod {

namespace detail {

/// Input `i` of `g` (1-based, after self) against a typed argument of `shape`: the traced shape for
/// a static input; for a dynamic one its rank, its constant extents and one extent per symbol
/// (bound in `binding`).
inline void check_typed_input(const graph::Graph& g, std::size_t i, const Shape& shape, DimBinding& binding,
                              const std::string& who) {
  const auto* in = static_cast<const graph::TensorNode*>(g.inputs()[i]);
  const auto refuse = [&](const std::string& why) {
    throw shape_error(who + ": input '" + in->name() + "' has shape " + shape.to_string() + ", but " + g.name() +
                      ".Graph was traced with " + in->shape_text() + why);
  };
  if (!in->is_dynamic()) {
    if (shape != in->shape()) refuse("");
    return;
  }
  const Dims d = in->dims();
  if (shape.rank() != d.size())
    refuse(" (rank " + std::to_string(shape.rank()) + " instead of " + std::to_string(d.size()) + ")");
  for (std::size_t a = 0; a < d.size(); ++a) {
    const std::string axis = " (axis " + std::to_string(a) + " is " + std::to_string(shape[a]);
    if (d[a].is_constant() && shape[a] != d[a].value()) refuse(axis + ", not " + std::to_string(d[a].value()) + ")");
    if (!d[a].is_symbol()) continue;
    const auto [it, fresh] = binding.emplace(d[a].name(), shape[a]);
    if (!fresh && it->second != shape[a])
      refuse(axis + ", but '" + d[a].name() + "' is " + std::to_string(it->second) + " in this call)");
  }
}

/// The output shape of `m` called with typed tensors of `shapes` and dtypes `dtypes` (the graph it
/// was traced with for that many tensors); throws as a call on tensors would, naming the module.
inline Shape typed_call_shape(const TracedModule& m, const std::string& who, const std::vector<Shape>& shapes,
                              const std::vector<DType>& dtypes) {
  std::string signature;
  for (std::size_t i = 0; i < shapes.size(); ++i) signature += i == 0 ? "Tensor" : ", Tensor";
  const graph::Graph& g = retrace_source(m, "(" + signature + ")", who);
  DimBinding binding;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto* in = static_cast<const graph::TensorNode*>(g.inputs()[i + 1]);
    if (dtypes[i] != in->dtype())
      throw dtype_error(who + ": input '" + in->name() + "' is " + std::string(dtype_name(dtypes[i])) + ", but " +
                        g.name() + ".Graph was traced with " + std::string(dtype_name(in->dtype())));
    check_typed_input(g, i + 1, shapes[i], binding, who);
  }
  const std::vector<graph::Node*> outs = g.outputs();
  if (outs.size() != 1 || !outs.front()->is_tensor())
    throw graph_error(who + ": " + g.name() + ".Graph returns " + std::to_string(outs.size()) +
                      " values; a typed graph calls a traced module that returns one tensor");
  const auto* out = static_cast<const graph::TensorNode*>(outs.front());
  if (out->dtype() != DType::float32)  // typed graphs state module outputs as float32
    throw dtype_error(who + ": " + g.name() + ".Graph returns " + std::string(dtype_name(out->dtype())) +
                      "; a typed graph calls a traced module that returns float32 (trace the enclosing module with "
                      "tmod::trace_module)");
  if (!out->is_dynamic()) return out->shape();
  std::vector<std::string> unbound;
  for (const DimExpr& e : out->dims()) e.symbols(unbound);
  for (const std::string& s : unbound)
    if (!binding.contains(s))
      throw shape_error(who + ": the output " + out->shape_text() + " of " + g.name() + ".Graph uses '" + s +
                        "', which no input binds");
  return evaluate(out->dims(), binding);
}

}  // namespace detail

template <class... A>
  requires(trace::symbolic<A> || ...)
auto TracedModule::forward(const A&... args) const {
  static_assert(((trace::symbolic<A> || std::derived_from<A, Tensor>) && ...),
                "tmod::TracedModule: called with typed symbolic tensors (tmod::symbolic_trace), a traced module takes "
                "tensors only, as its graph was traced for; the numbers of a trace are constants of its graph (trace "
                "the enclosing module with tmod::trace_module to pass them)");
  std::string name = trace::detail::module_path(this).value_or(type_name_);
  const std::string who = type_name_ + " '" + name + "'";
  std::tuple operands{trace::to_operand(args)...};
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  std::apply(
      [&](const auto&... o) {
        (shapes.push_back(trace::detail::runtime_shape(o)), ...);
        (dtypes.push_back(trace::detail::typed_dtype(o).value_or(DType::float32)), ...);
      },
      operands);
  const Shape shape = detail::typed_call_shape(*this, who, shapes, dtypes);
  const std::uint32_t id = trace::detail::next_call_id(name);
  return trace::builtin_call_node<TracedModule, trace::operand_t<A>...>{{}, this, std::move(name), std::move(operands),
                                                                        shape, id};
}

template <class... A>
  requires(trace::symbolic<A> || ...)
auto TracedModule::operator()(const A&... args) const {
  return forward(args...);
}

}  // namespace tracemod
