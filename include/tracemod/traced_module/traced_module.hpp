// TracedModule (MegEngine's TracedModule): a module whose behaviour is a runtime graph. Its
// attributes are those of the traced module: builtin modules (kept as they are), tensors, and, for
// every user module, another TracedModule. It keeps one graph per distinct call signature (most
// modules have one: graph()); calling it interprets the graph, with the module's forward hooks
// around it (a TracedModule is a Module: its hooks are registered as on any module).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/meta.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/graph/cost.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/graph/interpreter.hpp>
#include <tracemod/graph/print.hpp>
#include <tracemod/graph/sym.hpp>
#include <tracemod/nn/module.hpp>
#include <tracemod/nn/run_hooks.hpp>
#include <tracemod/trace/node.hpp>

#include <boost/hana/tuple.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tracemod {

class TracedModule final : public Module, public graph::GraphHolder {
 public:
  explicit TracedModule(std::string type_name) : type_name_(std::move(type_name)) {}
  TracedModule(const TracedModule& other) : Module(other), type_name_(other.type_name_), is_top_(other.is_top_),
                                            total_ids_(other.total_ids_) {
    copy_graphs_from(other);
  }
  TracedModule& operator=(const TracedModule& other) {
    if (this != &other) {
      Module::operator=(other);
      type_name_ = other.type_name_;
      is_top_ = other.is_top_;
      total_ids_ = other.total_ids_;
      copy_graphs_from(other);
      clear_watch_points();
      clear_end_points();
    }
    return *this;
  }
  TracedModule(TracedModule&& other) noexcept
      : Module(std::move(other)), type_name_(std::move(other.type_name_)), graphs_(std::move(other.graphs_)),
        is_top_(other.is_top_), total_ids_(other.total_ids_), watch_(std::move(other.watch_)),
        watch_values_(std::move(other.watch_values_)), end_(std::move(other.end_)),
        point_names_(std::move(other.point_names_)) {
    for (auto& entry : graphs_) entry.second->set_owner(this);  // graphs refer to their owner
  }
  TracedModule& operator=(TracedModule&& other) noexcept {
    if (this != &other) {
      Module::operator=(std::move(other));
      type_name_ = std::move(other.type_name_);
      graphs_ = std::move(other.graphs_);
      for (auto& entry : graphs_) entry.second->set_owner(this);
      is_top_ = other.is_top_;
      total_ids_ = other.total_ids_;
      watch_ = std::move(other.watch_);
      watch_values_ = std::move(other.watch_values_);
      end_ = std::move(other.end_);
      point_names_ = std::move(other.point_names_);
    }
    return *this;
  }
  ~TracedModule() override = default;

  // A TracedModule is a module class like those declaring TM_MODULE (its attributes are all
  // dynamic): it can be a member listed in TM_MODULE, be given to setattr by value, and fill a
  // ModuleList.
  using tracemod_reflected = TracedModule;
  static constexpr bool builtin = false;
  static constexpr auto tracemod_members() { return boost::hana::tuple<>{}; }

  /// The traced class's name ("ResNet").
  [[nodiscard]] std::string_view type_name() const override { return type_name_; }
  [[nodiscard]] bool is_builtin() const noexcept override { return false; }

  /// The only graph; throws graph_error naming the call signatures when the module was called in
  /// several ways (reach those graphs through the calls' exprs: expr->graph()).
  [[nodiscard]] graph::Graph& graph() const {
    if (graphs_.size() == 1) return *graphs_.front().second;
    if (graphs_.empty())
      throw graph_error(type_name_ + ": this traced module was never called while tracing, so it has no graph");
    std::string sigs;
    for (const auto& [sig, g] : graphs_) sigs += (sigs.empty() ? "" : ", ") + g->name() + " for forward" + sig;
    throw graph_error(type_name_ + ": graph() is ambiguous: the module was called with " +
                      std::to_string(graphs_.size()) + " different signatures (" + sigs +
                      "); use the graph of each call site's CallMethod expr (expr->graph())");
  }
  /// Every graph with its call signature, in the order they were recorded.
  [[nodiscard]] const std::vector<std::pair<std::string, std::unique_ptr<graph::Graph>>>& graphs() const noexcept {
    return graphs_;
  }
  [[nodiscard]] graph::Graph* graph_for(std::string_view signature) const override {
    for (const auto& [sig, g] : graphs_)
      if (sig == signature) return g.get();
    return nullptr;
  }
  graph::Graph& add_graph(std::string signature, std::unique_ptr<graph::Graph> g) {
    if (graph_for(signature) != nullptr) throw graph_error(type_name_ + ": a graph for " + signature + " exists already");
    g->set_owner(this);
    graphs_.emplace_back(std::move(signature), std::move(g));
    return *graphs_.back().second;
  }

  /// Runs the graph on tensors; returns the nested output (converts to Tensor for one output).
  /// With end points set, returns a tuple of the end points' values, in their order. Calls may run
  /// from several threads at once (docs/traced-module.md, "Threads").
  template <class... T>
    requires(std::convertible_to<const T&, Value> && ...)
  Value operator()(const T&... inputs) const {
    const std::vector<graph::NodeValue> in{graph::NodeValue(Value(inputs))...};
    return run(in);
  }
  /// Runs the module's forward hooks around the graph, as an eager call of a module does.
  Value run(std::span<const graph::NodeValue> inputs) const {
    if (const auto* hooks = detail::module_access::hooks(*this); hooks != nullptr && detail::any_live_hook(*hooks))
        [[unlikely]]
      return run_with_hooks(*hooks, inputs);
    return run_graph(inputs);
  }

 private:
  Value run_graph(std::span<const graph::NodeValue> inputs) const {
    const graph::Graph& g = graph();
    check_call_form(g, inputs);
    check_input_dtypes(g, inputs);
    if (watch_.empty() && end_.empty()) return g.pack_outputs(g.run(*this, inputs));
    check_points_alive();
    // This call's watched values, published whole when it ends: they never mix two calls.
    std::map<const graph::Node*, Value> watched;
    graph::RunHooks hooks;
    hooks.watch = watch_;
    hooks.on_watch = [&watched](const graph::Node* n, const graph::NodeValue& v) {
      if (const Value* x = std::get_if<Value>(&v)) watched[n] = *x;
    };
    std::vector<graph::NodeValue> ends;
    hooks.end = end_;
    hooks.end_values = &ends;
    std::vector<graph::NodeValue> out = g.run(*this, inputs, &hooks);
    for (const graph::Node* n : watch_)  // graph inputs are watched too
      for (std::size_t i = 0; i < inputs.size(); ++i)
        if (g.inputs()[i + 1] == n)
          if (const Value* x = std::get_if<Value>(&inputs[i])) watched[n] = *x;
    if (!watch_.empty()) {
      const std::lock_guard lock(watch_mutex_);
      watch_values_ = std::move(watched);
    }
    if (end_.empty()) return g.pack_outputs(out);
    ValueList values;
    for (const graph::NodeValue& v : ends) values.push_back(std::get<Value>(v));
    return Value::tuple(std::move(values));
  }
  /// run() with the module's live hooks: the pre-hooks see (and may replace) the inputs, the forward
  /// hooks the nested output (the end points' tuple when end points are set).
  Value run_with_hooks(const detail::hook_list& hooks, std::span<const graph::NodeValue> inputs) const {
    ValueList values;
    values.reserve(inputs.size());
    for (const graph::NodeValue& a : inputs) {
      const Value* v = std::get_if<Value>(&a);
      if (v == nullptr) throw graph_error(type_name_ + ": a module passed as an input cannot be shown to its hooks");
      values.push_back(*v);
    }
    Value output;
    if (detail::run_pre_hooks(*this, hooks, values)) {
      const std::vector<graph::NodeValue> replaced(values.begin(), values.end());
      output = run_graph(replaced);
    } else {
      output = run_graph(inputs);
    }
    detail::run_forward_hooks(*this, hooks, values, output);
    return output;
  }

 public:
  // ---- calls while tracing (traced_module/retrace.hpp) -------------------------------------------
  /// Called with a tmod::Sym while trace_module (or insert_exprs) records: records a call of this
  /// module, whose callee graph is a copy of the graph traced for these argument kinds, nested
  /// under the module being traced (as a user module's graph is). Returns the call's output; the
  /// graph must return one tensor (forward_flat takes any output structure).
  template <class... A>
    requires(graph::detail::involves_sym<A> || ...)
  Sym operator()(const A&... args) const;
  /// The call to write in a generic forward: on tensors it runs the graph and returns its output
  /// tensor; on Syms it records like operator() (or, when this module's own forward is being
  /// recorded, as in trace_module(traced, x), it copies its graph into the one recording).
  template <class... A>
    requires(std::convertible_to<const A&, Value> && ...)
  Tensor forward(const A&... args) const;
  template <class... A>
    requires(graph::detail::involves_sym<A> || ...)
  Sym forward(const A&... args) const;
  /// On the compile-time tracer's typed tensors (tmod::symbolic_trace): one opaque call node whose
  /// output shape the traced graph gives (traced_module/typed_call.hpp).
  template <class... A>
    requires(trace::symbolic<A> || ...)
  auto forward(const A&... args) const;
  template <class... A>
    requires(trace::symbolic<A> || ...)
  auto operator()(const A&... args) const;
  /// Anything else: a readable error instead of a cascade.
  template <class... A>
    requires(!(std::convertible_to<const A&, Value> && ...) && !(graph::detail::involves_sym<A> || ...) &&
             !(trace::symbolic<A> || ...))
  auto forward(const A&...) const {  // deduced: the assertion fires before the caller's use of the result
    static_assert(::tracemod::detail::always_false_v<A...>,
                  "tmod::TracedModule: a traced module runs its runtime graph: call it with tensors, with tmod::Sym "
                  "while tmod::trace_module records, or with typed symbolic tensors while tmod::symbolic_trace runs");
    return Tensor{};
  }
  /// Like forward, for any output structure: every output tensor (or Sym), flattened depth-first.
  template <class... A>
    requires(std::convertible_to<const A&, Value> && ...)
  std::vector<Tensor> forward_flat(const A&... args) const;
  template <class... A>
    requires(graph::detail::involves_sym<A> || ...)
  std::vector<Sym> forward_flat(const A&... args) const;
  /// The argument kinds this module was traced for, one per graph: "(Tensor, Tensor)", "(Tensor, 2)".
  [[nodiscard]] std::vector<std::string> traced_forms() const {
    std::vector<std::string> forms;
    for (const auto& [sig, g] : graphs_) forms.push_back(sig.empty() ? tensor_form(*g) : sig);
    return forms;
  }
  /// The graph traced for a call with these argument kinds: its signature's graph, or the graph of
  /// trace_module (which takes tensors only) when the call passes that many tensors; null if none.
  [[nodiscard]] graph::Graph* graph_for_call(std::string_view signature) const {
    if (graph::Graph* g = graph_for(signature)) return g;
    for (const auto& [sig, g] : graphs_)
      if (sig.empty() && tensor_form(*g) == signature) return g.get();
    return nullptr;
  }

  // ---- watch points and end points --------------------------------------------------------------
  /// Every later call records the values of these nodes (of the top graph: a run reports the
  /// values of its own graph; flatten() first to watch a node of a sub-graph).
  void set_watch_points(std::vector<graph::Node*> nodes) {
    const std::unordered_set<const graph::Node*> live = live_nodes(false);
    for (const graph::Node* n : nodes) {
      if (n == nullptr) throw graph_error("set_watch_points: a node is null");
      if (live.count(n) != 0) continue;
      const std::string which = "set_watch_points: node '" + n->name() + "' (%" + std::to_string(n->id()) + ")";
      if (live_nodes(true).count(n) != 0)
        throw graph_error(which + " is a node of the sub-graph " + n->top_graph()->name() +
                          ".Graph; only the top graph's nodes are watched (flatten() inlines the sub-graphs)");
      throw graph_error(which + " is not a node of " + type_name_ + "'s graphs");
    }
    watch_.assign(nodes.begin(), nodes.end());
    const std::lock_guard lock(watch_mutex_);
    watch_values_.clear();
    name_points();
  }
  void clear_watch_points() {
    watch_.clear();
    const std::lock_guard lock(watch_mutex_);
    watch_values_.clear();
    name_points();
  }
  /// The values of the watch points from the call that finished last, all from that one call (a
  /// copy: calls running meanwhile on other threads do not change it).
  [[nodiscard]] std::map<const graph::Node*, Value> watch_node_value() const {
    const std::lock_guard lock(watch_mutex_);
    return watch_values_;
  }
  /// Later calls stop as soon as these nodes (of the top graph) have values and return them.
  void set_end_points(std::vector<graph::Node*> nodes) {
    const graph::Graph& g = graph();
    for (const graph::Node* n : nodes) {
      if (n == nullptr) throw graph_error("set_end_points: a node is null");
      if (n->top_graph() != &g)
        throw graph_error("set_end_points: node '" + n->name() + "' (%" + std::to_string(n->id()) + ") belongs to " +
                          n->top_graph()->name() + ".Graph, not to this module's graph " + g.name() +
                          ".Graph; end points must be nodes of the top graph");
    }
    end_.assign(nodes.begin(), nodes.end());
    name_points();
  }
  void clear_end_points() {
    end_.clear();
    name_points();
  }

  /// A copy whose top graph inlines every user-module call (see flatten.hpp); idempotent.
  [[nodiscard]] TracedModule flatten() const;

  /// The cost of one forward (graph/cost.hpp): every call of graph(), sub-modules included.
  [[nodiscard]] functional::op_cost cost() const { return graph::total_cost(graph()); }
  /// Arithmetic operations of one forward, a multiply-add counting once.
  [[nodiscard]] std::int64_t flops() const { return cost().flops; }
  /// Multiply-accumulates of one forward's conv, linear and matmul calls.
  [[nodiscard]] std::int64_t macs() const { return cost().macs; }
  /// Bytes one forward's calls read and write.
  [[nodiscard]] std::int64_t bytes() const { return cost().bytes(); }

  /// True for the module trace_module returned (input/output surgery is allowed on its graph only).
  [[nodiscard]] bool is_top() const noexcept { return is_top_; }
  void set_top(bool top) noexcept { is_top_ = top; }
  /// (node count, expr count) of the whole hierarchy; new ids continue from there.
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> total_ids() const noexcept { return total_ids_; }
  /// Renumbers ids across the hierarchy in execution order.
  void reset_ids() { total_ids_ = graph::IdAllocator::renumber(graph()); }
  void set_total_ids(std::pair<std::int64_t, std::int64_t> ids) noexcept { total_ids_ = ids; }
  /// The top module's total_ids, which graph::IdAllocator reads and advances.
  [[nodiscard]] std::pair<std::int64_t, std::int64_t>* id_count() noexcept override {
    return is_top_ ? &total_ids_ : nullptr;
  }

  /// The traced module in PyTorch's module format (its graphs print with operator<< on graph()).
  [[nodiscard]] std::unique_ptr<TracedModule> clone_traced() const { return std::make_unique<TracedModule>(*this); }

 protected:
  void tracemod_members_(std::vector<detail::member_slot>&) const override {}
  [[nodiscard]] std::unique_ptr<Module> tracemod_copy_() const override { return std::make_unique<TracedModule>(*this); }
  void tracemod_assign_(Module&& source) override { *this = std::move(dynamic_cast<TracedModule&>(source)); }

 private:
  /// Every node of this module's graphs (`recursive`: and of the graphs they call).
  [[nodiscard]] std::unordered_set<const graph::Node*> live_nodes(bool recursive) const {
    std::unordered_set<const graph::Node*> live;
    for (const auto& entry : graphs_)
      for (const graph::Node* n : entry.second->nodes(recursive)) live.insert(n);
    return live;
  }
  /// Remembers how watch and end points were named: a later edit (compile(), erase) may delete
  /// them, and a run must then say which.
  void name_points() {
    point_names_.clear();
    for (const auto* points : {&watch_, &end_})
      for (const graph::Node* n : *points)
        point_names_.push_back("'" + n->name() + "' (%" + std::to_string(n->id()) + ")");
  }
  void check_points_alive() const {
    const std::unordered_set<const graph::Node*> live = live_nodes(false);
    std::size_t i = 0;
    for (const auto* points : {&watch_, &end_}) {
      for (const graph::Node* n : *points) {
        if (live.count(n) == 0)
          throw graph_error(type_name_ + ": the " + (points == &watch_ ? "watch" : "end") + " point " +
                            point_names_[i] + " is no longer a node of the graph (an edit such as compile() removed " +
                            "its expr); set the " + (points == &watch_ ? "watch" : "end") + " points again");
        ++i;
      }
    }
  }
  /// "(Tensor, Tensor)" for a graph of two tensor inputs.
  static std::string tensor_form(const graph::Graph& g) {
    std::string form;
    for (std::size_t i = 1; i < g.inputs().size(); ++i) form += i == 1 ? "Tensor" : ", Tensor";
    return "(" + form + ")";
  }
  /// A call with other argument kinds than traced names the forms that were.
  void check_call_form(const graph::Graph& g, std::span<const graph::NodeValue> inputs) const {
    std::string form;
    bool fits = inputs.size() + 1 == g.inputs().size();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto* v = std::get_if<Value>(&inputs[i]);
      const bool tensor = v != nullptr && v->is_tensor();
      fits = fits && tensor;
      form += (i == 0 ? "" : ", ") + (tensor ? std::string("Tensor") : v != nullptr ? v->repr() : std::string("Module"));
    }
    if (fits) return;
    const std::size_t want = g.inputs().size() - 1;
    const std::string count = inputs.size() == want ? std::string()
                                                    : g.name() + ".Graph takes " + std::to_string(want) + " input" +
                                                          (want == 1 ? "" : "s") + ", got " + std::to_string(inputs.size()) + ": ";
    throw graph_error(type_name_ + ": " + count + "called with (" + form + "), but it was traced for forward" +
                      tensor_form(g) + "; call it with the arguments it was traced with");
  }
  /// A tensor input of another dtype than traced is a dtype_error (its shape is checked by the run).
  static void check_input_dtypes(const graph::Graph& g, std::span<const graph::NodeValue> inputs) {
    const std::vector<graph::Node*> params = g.inputs();
    for (std::size_t i = 0; i < inputs.size() && i + 1 < params.size(); ++i) {
      const auto* v = std::get_if<Value>(&inputs[i]);
      if (v == nullptr || !v->is_tensor() || !v->tensor().defined() || !params[i + 1]->is_tensor()) continue;
      const DType want = static_cast<const graph::TensorNode*>(params[i + 1])->dtype();
      if (v->tensor().dtype() != want)
        throw dtype_error(g.name() + ".Graph: input '" + params[i + 1]->name() + "' is " +
                          std::string(dtype_name(v->tensor().dtype())) + ", but the graph was traced with " +
                          std::string(dtype_name(want)));
    }
  }

  void copy_graphs_from(const TracedModule& other) {
    graphs_.clear();
    for (const auto& [sig, g] : other.graphs_) graphs_.emplace_back(sig, g->clone(this));
    // Children were copied with the module tree; point their graphs at ours.
    for (const auto& [sig, g] : graphs_)
      for (const auto& e : g->expr_list_())
        if (graph::Graph* sub = e->graph()) sub->set_parent(g.get());
  }

  std::string type_name_;
  std::vector<std::pair<std::string, std::unique_ptr<graph::Graph>>> graphs_;
  bool is_top_ = false;
  std::pair<std::int64_t, std::int64_t> total_ids_{0, 0};
  std::vector<const graph::Node*> watch_;
  mutable std::mutex watch_mutex_;  // guards watch_values_: calls on several threads publish them
  mutable std::map<const graph::Node*, Value> watch_values_;
  std::vector<const graph::Node*> end_;
  std::vector<std::string> point_names_;  // watch points, then end points
};

}  // namespace tracemod

// flatten() is defined with its helpers, the calls on Syms with the copying of graphs, and the calls
// on typed symbolic tensors with their shape checks.
#include <tracemod/traced_module/flatten.hpp>
#include <tracemod/traced_module/retrace.hpp>
#include <tracemod/traced_module/typed_call.hpp>
