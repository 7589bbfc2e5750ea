// tmod::trace_module(module, example_inputs...): runs the module's forward once on tmod::Sym
// arguments and returns a TracedModule whose graphs record it. Because it records through Sym, any
// forward traces: reassigned variables, loops over a ModuleList, non-tensor arguments (frozen into
// the calls). User modules become nested TracedModules with graphs of their own (one per distinct
// call signature); builtin modules stay opaque calls.
//
// The traced module owns its own module tree; its tensors are handles to the original's buffers
// (reference counted, as torch.fx's GraphModule and MegEngine's TracedModule share parameters), so
// it outlives the original. clone() makes one with its own copies of the weights.
//
// Hooks are not traced: none runs while the forward records (its values are symbolic) and none is
// recorded in a graph. The traced module tree keeps the hooks of the modules it stands for, so
// calling the traced module runs them where the eager call does (docs/traced-module.md, "Hooks").
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/recorder.hpp>
#include <tracemod/graph/sym.hpp>
#include <tracemod/nn/dropout.hpp>
#include <tracemod/nn/module.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <cmath>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tracemod {

/// A dynamic dimension of trace_module: axis `axis` (negative counts from the end) of tensor input
/// `input` (counting tensor inputs only; -1: every tensor input that has the axis) is the symbol
/// `name`. Axes sharing a name must have the same extent in every call.
struct DynamicDim {
  std::int64_t axis = 0;
  std::string name;
  std::int64_t input = -1;
};

/// Options of trace_module.
struct TraceOptions {
  /// Run the traced module on the example inputs and compare with eager mode (MegEngine's default
  /// checker); throws graph_error on a mismatch.
  bool check = true;
  /// Relative tolerance of that check (the same kernels run, so results are normally identical).
  double rtol = 1e-5;
  /// Axes traced as symbols instead of their example extents ({{0, "batch"}}, or per input
  /// {{0, "N", 0}, {2, "H", 0}, {3, "W", 0}}): the traced module then runs at any extent there.
  std::vector<DynamicDim> dynamic_dims{};
};

namespace detail {

/// Builds the traced module tree of `m` (tensors shared) and remembers which TracedModule stands
/// for which original module. Every module of the tree keeps the forward hooks of the one it stands
/// for (a builtin's copy holds them, a TracedModule is given them): the same registrations, so the
/// traced module calls what the original calls, and a handle removes a hook from both. A module
/// reached by several attributes (Module::share_module) is built once, and every attribute holds
/// that one module, as in the original.
inline std::unique_ptr<TracedModule> make_traced_tree(const Module& m,
                                                      std::unordered_map<const Module*, TracedModule*>& map,
                                                      std::unordered_map<const Module*, std::shared_ptr<Module>>& built) {
  auto tm = std::make_unique<TracedModule>(std::string(m.type_name()));
  map[&m] = tm.get();
  module_access::share_hooks(m, *tm);
  for (const auto& [name, p] : m.named_parameters("", false)) tm->setattr(name, p);
  for (const auto& [name, b] : m.named_buffers("", false)) tm->setattr(name, b);
  for (const auto& [name, child] : module_access::all_children(m)) {
    if (const auto it = built.find(&child); it != built.end()) {
      module_access::add_shared_child(*tm, name, it->second);
      continue;
    }
    if (child.is_builtin())
      tm->setattr(name, module_access::copy(child));
    else
      tm->setattr(name, make_traced_tree(child, map, built));
    built.emplace(&child, module_access::shared_child(*tm, name));
  }
  module_access::copy_flags(m, *tm);
  return tm;
}

inline std::unique_ptr<TracedModule> make_traced_tree(const Module& m,
                                                      std::unordered_map<const Module*, TracedModule*>& map) {
  std::unordered_map<const Module*, std::shared_ptr<Module>> built;
  return make_traced_tree(m, map, built);
}

class TraceSession final : public graph::ModuleTracer {
 public:
  explicit TraceSession(const Module& root) {
    std::unordered_map<const Module*, std::shared_ptr<Module>> built;
    root_tree_ = make_traced_tree(root, traced_, built);
  }

  graph::Graph* find_graph(const Module& module, const std::string& signature) override {
    return traced_of(module).graph_for(signature);
  }
  graph::Graph& add_graph(const Module& module, const std::string& signature, std::string name,
                          std::string qualname) override {
    TracedModule& tm = traced_of(module);
    return tm.add_graph(signature, std::make_unique<graph::Graph>(std::move(name), std::move(qualname), &tm));
  }
  const graph::AttributeIndex& index_of(const Module& module) override {
    auto& slot = indexes_[&module];
    if (!slot) slot = std::make_unique<graph::AttributeIndex>(module);
    return *slot;
  }

  TracedModule& traced_of(const Module& module) {
    const auto it = traced_.find(&module);
    if (it == traced_.end())
      throw graph_error("trace_module: a " + std::string(module.type_name()) +
                        " module reached while tracing is not part of the traced module's tree");
    return *it->second;
  }
  std::unique_ptr<TracedModule> release_root() { return std::move(root_tree_); }

 private:
  std::unordered_map<const Module*, TracedModule*> traced_;
  std::unique_ptr<TracedModule> root_tree_;
  std::unordered_map<const Module*, std::unique_ptr<graph::AttributeIndex>> indexes_;
};

template <class T>
inline constexpr bool is_trace_options_v = std::same_as<std::remove_cvref_t<T>, TraceOptions>;

/// The graph of the traced module's forward, with its `self` input.
inline graph::Graph& add_top_graph(TracedModule& top) {
  const std::string name(top.type_name());
  graph::Graph& g = top.add_graph("", std::make_unique<graph::Graph>(name, name, &top));
  g.add_self_input("Module");
  return g;
}

/// Deletes the tensor attributes of traced modules that no getattr of any graph reads: as in
/// MegEngine, a traced module holds only what its forward uses. Builtin modules keep all of theirs
/// (their forward reads them outside the graph).
inline void drop_unread_tensors(TracedModule& top) {
  std::set<std::pair<const Module*, std::string>> read;  // (owning module, tensor name)
  for (const auto& [path, m] : top.named_modules()) {
    const auto* tm = dynamic_cast<const TracedModule*>(&m);
    if (tm == nullptr) continue;
    for (const auto& entry : tm->graphs()) {
      const graph::Node* self = entry.second->inputs().front();
      for (const graph::Expr* e : entry.second->exprs(false)) {
        if (e->kind() != graph::ExprKind::get_attr || e->inputs().front() != self || !e->output()->is_tensor()) continue;
        const std::string& attr = e->target();
        const std::size_t dot = attr.rfind('.');
        if (dot == std::string::npos)
          read.emplace(tm, attr);
        else
          read.emplace(&tm->getattr(attr.substr(0, dot)).module(), attr.substr(dot + 1));
      }
    }
  }
  for (const auto& [path, m] : top.named_modules()) {
    auto* tm = dynamic_cast<TracedModule*>(&m);
    if (tm == nullptr) continue;
    std::vector<std::string> unread;
    for (const auto& [name, t] : tm->named_tensors("", false))
      if (read.count({tm, name}) == 0) unread.push_back(name);
    for (const std::string& name : unread) tm->delattr(name);
  }
}

/// Makes `top` the finished result of a trace: every graph compiled (dead exprs dropped), marked as
/// the top module, ids numbered across the hierarchy.
inline void finish_trace(TracedModule& top) {
  for (graph::Graph* sub : top.graph().graphs(true)) sub->compile();  // as MegEngine builds every traced graph
  drop_unread_tensors(top);
  top.set_top(true);
  top.reset_ids();
}

/// Why two runs of `m` may differ: its Dropout modules in training mode draw new random numbers on
/// every call. Empty when there are none.
inline std::string randomness_hint(const Module& m) {
  std::string names;
  for (const auto& [path, child] : m.named_modules())
    if (const auto* d = dynamic_cast<const nn::Dropout*>(&child); d != nullptr && d->training() && d->p > 0.0)
      names += (names.empty() ? "'" : ", '") + (path.empty() ? std::string(m.type_name()) : path) + "'";
  if (names.empty()) return {};
  return "; the Dropout module(s) " + names + " are in training mode and draw new random numbers on every call: " +
         "call eval() before tracing, or pass TraceOptions{.check = false}";
}

/// Compares eager and traced outputs; throws graph_error naming the first differing leaf (and
/// `hint`, when values differ).
inline void check_outputs(const Value& eager, const Value& traced, double rtol, const std::string& where,
                          const std::string& hint) {
  if (eager.kind() != traced.kind()) throw graph_error(where + ": the traced output's structure differs from eager mode");
  if (eager.is_tensor()) {
    const Tensor& a = eager.tensor();
    const Tensor& b = traced.tensor();
    if (a.shape() != b.shape() || a.dtype() != b.dtype())
      throw graph_error(where + ": traced output has shape " + b.shape().to_string() + ", eager mode " +
                        a.shape().to_string());
    if (a.dtype() != DType::float32) return;
    const auto x = a.values<float>();
    const auto y = b.values<float>();
    for (std::size_t i = 0; i < x.size(); ++i)  // equal infinities agree (their difference is NaN)
      if (x[i] != y[i] && !(std::abs(x[i] - y[i]) <= rtol * std::max(1.0f, std::abs(x[i]))) && !(std::isnan(x[i]) && std::isnan(y[i])))
        throw graph_error(where + ": the traced module's output differs from eager mode at element " +
                          std::to_string(i) + " (" + std::to_string(y[i]) + " vs " + std::to_string(x[i]) + ")" +
                          hint);
    return;
  }
  if (eager.is_sequence()) {
    if (eager.size() != traced.size()) throw graph_error(where + ": the traced output's structure differs from eager mode");
    for (std::size_t i = 0; i < eager.size(); ++i) check_outputs(eager[i], traced[i], rtol, where, hint);
  }
}

/// The eager result of forward as a Value (Tensor, or nested tuples/vectors of tensors).
template <class R>
Value to_value_tree(const R& r) {
  if constexpr (std::derived_from<R, Tensor>) {
    return Value(Tensor(r));
  } else if constexpr (requires { std::tuple_size<R>::value; }) {
    return std::apply([](const auto&... x) { return Value::tuple({to_value_tree(x)...}); }, r);
  } else if constexpr (requires { r.begin(); r.end(); }) {
    ValueList v;
    for (const auto& x : r) v.push_back(to_value_tree(x));
    return Value::list(std::move(v));
  } else {
    return Value(r);
  }
}

/// Marks the axes of tensor input `index` (of `count`; node `in`) that `options` makes dynamic;
/// throws value_error for an axis out of range or a symbol given two example extents.
inline void set_input_dims(graph::TensorNode& in, std::size_t index, const TraceOptions& options, DimBinding& seen) {
  if (options.dynamic_dims.empty()) return;
  const Shape& s = in.shape();
  Dims d = to_dims(s);
  for (const DynamicDim& dd : options.dynamic_dims) {
    if (dd.input >= 0 && static_cast<std::size_t>(dd.input) != index) continue;
    const auto rank = static_cast<std::int64_t>(s.rank());
    if (dd.axis < -rank || dd.axis >= rank) {
      if (dd.input < 0) continue;  // an axis for every input applies where it exists
      throw value_error("trace_module: dynamic dim '" + dd.name + "' names axis " + std::to_string(dd.axis) +
                        " of input '" + in.name() + "', whose example shape " + s.to_string() + " has rank " +
                        std::to_string(rank));
    }
    const auto axis = static_cast<std::size_t>(dd.axis < 0 ? dd.axis + rank : dd.axis);
    const auto [it, fresh] = seen.emplace(dd.name, s[axis]);
    if (!fresh && it->second != s[axis])
      throw value_error("trace_module: dynamic dim '" + dd.name + "' is " + std::to_string(it->second) +
                        " in one example input but " + std::to_string(s[axis]) + " on axis " + std::to_string(axis) +
                        " of input '" + in.name() + "' " + s.to_string());
    d[axis] = DimExpr::symbol(dd.name);
  }
  in.set_dims(d);
}

/// Whether M's forward accepts sizeof...(I) Syms.
template <class M, std::size_t... I>
constexpr bool forward_takes_syms(std::index_sequence<I...>) {
  return requires(const M& m) { m.forward((static_cast<void>(I), std::declval<const Sym&>())...); };
}

/// The input names of the graph a traced module is traced again with: it keeps its own (as
/// MegEngine copies them when re-tracing a TracedModule). Empty when none fits.
template <class M, class Inputs>
std::vector<std::string> retrace_input_names(const M& module, const Inputs& inputs) {
  std::vector<std::string> names;
  if constexpr (std::same_as<M, TracedModule>) {
    const std::string form = std::apply([](const auto&... a) { return graph::detail::signature_of(a...); }, inputs);
    if (const graph::Graph* g = module.graph_for_call(form))
      for (std::size_t i = 1; i < g->inputs().size(); ++i) names.push_back(g->inputs()[i]->name());
    if (names.size() != std::tuple_size_v<Inputs>) names.clear();  // numbers among the arguments: default names
  }
  return names;
}

template <class M, class Inputs>
TracedModule trace_impl(const M& module, const Inputs& inputs, std::vector<std::string> names,
                        const TraceOptions& options) {
  if (names.empty()) names = retrace_input_names(module, inputs);
  TraceSession session(module);
  const std::unique_ptr<TracedModule> root = session.release_root();
  TracedModule& top = *root;
  graph::Graph& g = add_top_graph(top);
  auto* self = static_cast<graph::ModuleNode*>(g.inputs().front());
  {
    graph::Recorder recorder(g, self, &module, &session, &session.index_of(module));
    std::size_t k = 0, tensors = 0;
    DimBinding symbols;
    const auto input = [&](const auto& a) -> decltype(auto) {
      using T = std::remove_cvref_t<decltype(a)>;
      if constexpr (std::derived_from<T, Tensor>) {
        if (!a.defined()) throw value_error("trace_module: example input " + std::to_string(k) + " is undefined");
        const std::string name = k < names.size() ? names[k] : "x";
        ++k;
        graph::TensorNode* in = g.add_tensor_input(name, a.shape(), a.dtype());
        set_input_dims(*in, tensors++, options, symbols);
        return Sym(in);
      } else {
        ++k;
        return a;  // non-tensor arguments are frozen into the graph
      }
    };
    auto syms = std::apply([&](const auto&... a) { return std::tuple<graph::detail::callee_arg_t<std::remove_cvref_t<decltype(a)>>...>{input(a)...}; }, inputs);
    using R = std::remove_cvref_t<decltype(std::apply([&](const auto&... s) { return module.forward(s...); }, syms))>;
    static_assert(graph::detail::recordable_output<R>,
                  "tmod::trace_module: forward must return a tensor, or a std::tuple / std::pair / std::vector of "
                  "tensors (nested as needed)");
    if constexpr (graph::detail::recordable_output<R>) {
      const R out = std::apply([&](const auto&... s) { return module.forward(s...); }, syms);
      g.set_outputs(graph::detail::output_tree<R>::flatten(recorder, out));
    }
  }
  finish_trace(top);
  if (options.check) {
    // Through the call operator: the module's own hooks run, as the traced module's do (forward
    // alone for arguments the call operator does not take eagerly, such as a bool).
    const Value eager = std::apply(
        [&](const auto&... a) {
          if constexpr ((functional::eager_operand<decltype(a)> && ...)) {
            if constexpr (requires { module(a...); }) return to_value_tree(module(a...));
          }
          return to_value_tree(module.forward(a...));
        },
        inputs);
    std::vector<graph::NodeValue> in;
    const auto add = [&](const auto& a) {
      if constexpr (std::derived_from<std::remove_cvref_t<decltype(a)>, Tensor>) in.emplace_back(Value(Tensor(a)));
    };
    std::apply([&](const auto&... a) { (add(a), ...); }, inputs);
    check_outputs(eager, top.run(in), options.rtol, "trace_module(" + std::string(module.type_name()) + ")",
                  randomness_hint(module));
  }
  return std::move(top);
}

}  // namespace detail

/// Traces `module`'s forward on example inputs (tensors, and non-tensor values frozen into the
/// graph); a TraceOptions may come last. Inputs are named x, x_1, ...
template <class M, class... A>
  requires std::derived_from<M, Module>
TracedModule trace_module(const M& module, const A&... inputs) {
  if constexpr (sizeof...(A) > 0 && detail::is_trace_options_v<std::tuple_element_t<sizeof...(A) - 1, std::tuple<A...>>>) {
    const auto all = std::tie(inputs...);
    const TraceOptions& options = std::get<sizeof...(A) - 1>(all);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return detail::trace_impl(module, std::tie(std::get<I>(all)...), {}, options);
    }(std::make_index_sequence<sizeof...(A) - 1>{});
  } else {
    return detail::trace_impl(module, std::tie(inputs...), {}, TraceOptions{});
  }
}

/// Traces with named tensor inputs: trace_module(m, {{"image", t}}).
template <class M>
  requires std::derived_from<M, Module>
TracedModule trace_module(const M& module, std::initializer_list<std::pair<std::string_view, Tensor>> named,
                          const TraceOptions& options = {}) {
  std::vector<std::string> names;
  std::vector<Tensor> tensors;
  for (const auto& [n, t] : named) {
    names.emplace_back(n);
    tensors.push_back(t);
  }
  const auto trace_n = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return detail::trace_impl(module, std::tie(tensors[I]...), names, options);
  };
  switch (tensors.size()) {
    case 1:
      if constexpr (detail::forward_takes_syms<M>(std::make_index_sequence<1>{})) return trace_n(std::make_index_sequence<1>{});
      break;
    case 2:
      if constexpr (detail::forward_takes_syms<M>(std::make_index_sequence<2>{})) return trace_n(std::make_index_sequence<2>{});
      break;
    case 3:
      if constexpr (detail::forward_takes_syms<M>(std::make_index_sequence<3>{})) return trace_n(std::make_index_sequence<3>{});
      break;
    default: break;
  }
  throw value_error("trace_module: " + std::string(module.type_name()) + "'s forward does not take " +
                    std::to_string(tensors.size()) + " named tensor inputs (1 to 3 are supported)");
}

}  // namespace tracemod
