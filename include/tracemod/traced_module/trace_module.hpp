// tmod::trace_module(module, example_inputs...): runs the module's forward once on tmod::Sym
// arguments and returns a TracedModule whose graphs record it. Because it records through Sym, any
// forward traces: reassigned variables, loops over a ModuleList, non-tensor arguments (frozen into
// the calls). User modules become nested TracedModules with graphs of their own (one per distinct
// call signature); builtin modules stay opaque calls.
//
// The traced module owns its own module tree; its tensors are handles to the original's buffers
// (reference counted, as torch.fx's GraphModule and MegEngine's TracedModule share parameters), so
// it outlives the original. clone() makes one with its own copies of the weights.
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

/// Options of trace_module.
struct TraceOptions {
  /// Run the traced module on the example inputs and compare with eager mode (MegEngine's default
  /// checker); throws graph_error on a mismatch.
  bool check = true;
  /// Relative tolerance of that check (the same kernels run, so results are normally identical).
  double rtol = 1e-5;
};

namespace detail {

/// Builds the traced module tree of `m` (tensors shared) and remembers which TracedModule stands
/// for which original module. A module reached by several attributes (Module::share_module) is
/// built once, and every attribute holds that one module, as in the original.
inline std::unique_ptr<TracedModule> make_traced_tree(const Module& m,
                                                      std::unordered_map<const Module*, TracedModule*>& map,
                                                      std::unordered_map<const Module*, std::shared_ptr<Module>>& built) {
  auto tm = std::make_unique<TracedModule>(std::string(m.type_name()));
  map[&m] = tm.get();
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
  module_access::set_training_flag(*tm, m.training());
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
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!(std::abs(x[i] - y[i]) <= rtol * std::max(1.0f, std::abs(x[i]))) && !(std::isnan(x[i]) && std::isnan(y[i])))
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

/// Whether M's forward accepts sizeof...(I) Syms.
template <class M, std::size_t... I>
constexpr bool forward_takes_syms(std::index_sequence<I...>) {
  return requires(const M& m) { m.forward((static_cast<void>(I), std::declval<const Sym&>())...); };
}

template <class M, class Inputs>
TracedModule trace_impl(const M& module, const Inputs& inputs, const std::vector<std::string>& names,
                        const TraceOptions& options) {
  TraceSession session(module);
  const std::unique_ptr<TracedModule> root = session.release_root();
  TracedModule& top = *root;
  graph::Graph& g = add_top_graph(top);
  auto* self = static_cast<graph::ModuleNode*>(g.inputs().front());
  {
    graph::Recorder recorder(g, self, &module, &session, &session.index_of(module));
    std::size_t k = 0;
    const auto input = [&](const auto& a) -> decltype(auto) {
      using T = std::remove_cvref_t<decltype(a)>;
      if constexpr (std::derived_from<T, Tensor>) {
        if (!a.defined()) throw value_error("trace_module: example input " + std::to_string(k) + " is undefined");
        const std::string name = k < names.size() ? names[k] : "x";
        ++k;
        return Sym(g.add_tensor_input(name, a.shape(), a.dtype()));
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
    const Value eager = std::apply([&](const auto&... a) { return to_value_tree(module.forward(a...)); }, inputs);
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
