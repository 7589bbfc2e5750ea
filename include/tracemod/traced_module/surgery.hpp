// Recording new exprs into a traced graph (MegEngine's InternalGraph.insert_exprs) and the module
// getattrs and calls made inside the scope. The other surgery functions are graph/surgery.hpp's.
//
// Inside an insert_exprs scope, nodes taken as tmod::Sym record new exprs exactly as trace_module
// does (the same ADL hooks of every functional op and tensor operator); module nodes are read with
// graph::attr and called with graph::call. On scope exit the new exprs move, contiguously, right
// after `after` (or after the last producer of an existing node they use, if that is later); an
// exception thrown inside the scope removes them again, leaving the graph as it was.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/check.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/graph/recorder.hpp>
#include <tracemod/graph/sym.hpp>
#include <tracemod/traced_module/trace_module.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <unordered_map>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tracemod::graph {


namespace detail {

/// The tensor arguments of a call of traced graph `sub` must have the shapes and dtypes its inputs
/// were traced with: its exprs were recorded (and its output shapes inferred) for those.
inline void require_traced_inputs(const Graph& sub, const std::vector<CallArg>& args, const std::string& callee) {
  const std::vector<Node*> inputs = sub.inputs();  // `self` first
  std::size_t k = 1;
  for (const CallArg& a : args) {
    const auto* n = std::get_if<Node*>(&a);
    if (n == nullptr || !(*n)->is_tensor() || k >= inputs.size()) continue;
    const auto* want = static_cast<const TensorNode*>(inputs[k++]);
    const auto* got = static_cast<const TensorNode*>(*n);
    if (got->shape() != want->shape() || got->dtype() != want->dtype())
      throw graph_error("call: argument '" + got->name() + "' of " + callee + " is " + shape_text(got) + ", but " +
                        sub.name() + ".Graph's input '" + want->name() + "' was traced with " + shape_text(want));
  }
}

}  // namespace detail

/// The scope returned by insert_exprs: while it lives, Sym arguments record into its graph. One scope
/// records into a graph at a time (a second is refused when made); scopes of different graphs may
/// end in any order, since each one's recorder unlinks itself from the recorder stack.
///
/// It is also the tracer of user modules called in it (as trace_module's session is): a user module
/// attached with setattr to the graph's traced module and called with Syms (`neg(tmod::Sym(x))`,
/// with `neg` the module itself, typed) is traced into a graph of its own, one per signature, as a
/// fresh TracedModule tree standing for it; on commit that tree replaces the attribute.
class InsertScope final : private ModuleTracer {
 public:
  InsertScope(Graph& g, const Expr* after) : graph_(g), after_(after), uncaught_(std::uncaught_exceptions()) {
    if (after != nullptr && after->kind() != ExprKind::input && !g.contains(after))
      throw graph_error("insert_exprs: expr %" + std::to_string(after->id()) + " is not an expr of " + g.name() +
                        ".Graph");
    const std::vector<Node*> inputs = g.inputs();
    if (inputs.empty() || inputs.front()->is_tensor())
      throw graph_error("insert_exprs: " + g.name() + ".Graph has no `self` input");
    // Two open scopes on one graph would each splice the other's exprs when they end.
    if (Recorder::records_into(g))
      throw graph_error("insert_exprs: " + g.name() + ".Graph is already recording (an insert_exprs scope on it is " +
                        "still open); end that scope first");
    auto& list = g.exprs_;
    if (!list.empty()) last_old_ = std::prev(list.end());
    g.reset_insert_point();  // record at the end; moved into place on exit
    // No index: the recorder asks index_of for one when a module is called (most scopes never do).
    recorder_.emplace(g, static_cast<ModuleNode*>(inputs.front()), g.owner(), static_cast<ModuleTracer*>(this), nullptr);
  }
  InsertScope(const InsertScope&) = delete;
  InsertScope& operator=(const InsertScope&) = delete;
  ~InsertScope() {
    recorder_.reset();
    if (std::uncaught_exceptions() > uncaught_)
      rollback();
    else
      commit();
  }

  [[nodiscard]] Graph& graph() const noexcept { return graph_; }

 private:
  Graph::expr_list::iterator first_new() {
    auto& list = graph_.exprs_;
    return last_old_ ? std::next(*last_old_) : list.begin();
  }

  // ---- ModuleTracer: user modules called in the scope --------------------------------------------
  Graph* find_graph(const Module& module, const std::string& signature) override {
    // A traced module of the tree already called with this signature keeps its graph (as
    // graph::call uses it); any other call is traced (a traced module: its graph copied) into a
    // traced copy that replaces the attribute on commit.
    if (traced_.count(&module) == 0)
      if (const auto* tm = dynamic_cast<const TracedModule*>(&module))
        if (Graph* g = tm->graph_for(signature)) return g;
    return traced_of(module).graph_for(signature);
  }
  Graph& add_graph(const Module& module, const std::string& signature, std::string name, std::string qualname) override {
    TracedModule& tm = traced_of(module);
    Graph& g = tm.add_graph(signature, std::make_unique<Graph>(std::move(name), std::move(qualname), &tm));
    new_graphs_.push_back(&g);
    return g;
  }
  const AttributeIndex& index_of(const Module& module) override {
    if (&module == graph_.owner()) {
      if (!owner_index_) {
        // Modules only: a plain tensor argument stays a Constant inside the scope (attributes are
        // read with graph::attr).
        owner_index_.emplace(module);
        owner_index_->tensors.clear();
      }
      return *owner_index_;
    }
    auto& slot = indexes_[&module];
    if (!slot) slot = std::make_unique<AttributeIndex>(module);
    return *slot;
  }

  /// The traced tree standing for `module`: made on its first call when it is an attribute of the
  /// graph's module (its sub-modules are mapped with it).
  TracedModule& traced_of(const Module& module) {
    if (const auto it = traced_.find(&module); it != traced_.end()) return *it->second;
    const auto path = [&]() -> const std::string* {
      if (graph_.owner() == nullptr) return nullptr;
      const AttributeIndex& owner = index_of(*graph_.owner());
      const auto it = owner.modules.find(&module);
      return it == owner.modules.end() ? nullptr : &it->second;
    }();
    if (path == nullptr)
      throw graph_error("insert_exprs: a " + std::string(module.type_name()) + " module called in the scope is not an " +
                        "attribute of " + graph_.name() + ".Graph's module; attach it with setattr first");
    converted_.emplace_back(*path, ::tracemod::detail::make_traced_tree(module, traced_));
    return *converted_.back().second;
  }

  void rollback() noexcept {
    for (const Graph* sub : new_graphs_)
      if (sub->top_graph() == &graph_) graph_.names().release(sub->name());
    auto& list = graph_.exprs_;
    // Last first: a new expr's outputs are used by later new exprs only.
    while (first_new() != list.end()) graph_.detach(std::prev(list.end()));
    graph_.changed();
  }

  void commit() noexcept {
    // The traced trees of user modules called in the scope replace the modules (whose sub-graphs are
    // compiled as trace_module compiles every graph).
    for (auto& [path, tree] : converted_) graph_.owner()->setattr(path, std::unique_ptr<Module>(std::move(tree)));
    for (Graph* sub : new_graphs_) sub->compile();
    auto& list = graph_.exprs_;
    const auto first = first_new();
    if (first == list.end()) return;
    std::unordered_set<const Expr*> fresh;
    for (auto it = first; it != list.end(); ++it) fresh.insert(it->get());
    // The insertion point: after `after`, or after the last old producer a new expr depends on.
    std::optional<std::size_t> at;
    const auto later = [&](const Expr* e) {
      if (e == nullptr || e->kind() == ExprKind::input || fresh.count(e) != 0) return;
      const std::size_t p = graph_.position(e);
      if (!at || p > *at) at = p;
    };
    later(after_);
    for (const Expr* e : fresh)
      for (const Node* in : e->inputs()) later(in->expr());
    auto where = list.begin();
    if (at) where = std::next(list.begin(), static_cast<std::ptrdiff_t>(*at) + 1);
    if (where != first) list.splice(where, list, first, list.end());
    // Ids continue from the hierarchy's current count.
    IdAllocator ids = IdAllocator::for_hierarchy(graph_);
    for (const auto& up : list)
      if (fresh.count(up.get()) != 0) ids.number(*up);
    for (const Graph* sub : new_graphs_)
      for (Expr* e : sub->exprs(false)) ids.number(*e);
    ids.commit(graph_);
    graph_.changed();
    // A broken invariant here is a bug of this file: debug builds stop on it (the destructor
    // cannot throw).
    detail::check_after_surgery(graph_);
  }

  Graph& graph_;
  const Expr* after_;
  int uncaught_;
  std::optional<Graph::expr_list::iterator> last_old_;
  std::optional<AttributeIndex> owner_index_;
  std::unordered_map<const Module*, TracedModule*> traced_;
  std::vector<std::pair<std::string, std::unique_ptr<TracedModule>>> converted_;
  std::unordered_map<const Module*, std::unique_ptr<AttributeIndex>> indexes_;
  std::vector<Graph*> new_graphs_;
  std::optional<Recorder> recorder_;
};

/// MegEngine's `with graph.insert_exprs(expr):`. Keep the returned scope alive while recording:
///   { auto scope = tmod::graph::insert_exprs(g, relu_expr); auto y = F::neg(tmod::Sym(x)); ... }
[[nodiscard]] inline InsertScope insert_exprs(Graph& g, const Expr* after = nullptr) { return InsertScope(g, after); }

/// A getattr of a module node inside insert_exprs: `attr(self, "layer1.0.conv1")`, a module or a
/// tensor attribute of the live module the node stands for.
inline Sym attr(const Sym& module, const std::string& path) {
  Recorder& r = Recorder::current("tmod::graph::attr");
  Graph& g = r.graph();
  detail::require_node_of(g, module.node(), "attr('" + path + "')");
  if (module.is_tensor()) throw graph_error("attr('" + path + "'): " + module.describe() + " is a tensor, not a module");
  auto* base = static_cast<ModuleNode*>(module.node());
  const Module* m = base->owner();
  if (m == nullptr) throw graph_error("attr('" + path + "'): the module of " + module.describe() + " is not at hand");
  if (!m->has_attr(path))
    throw graph_error("attr('" + path + "'): " + std::string(m->type_name()) + " has no attribute '" + path + "'");
  const ConstAttrRef ref = m->getattr(path);
  std::string name = path;
  std::replace(name.begin(), name.end(), '.', '_');
  if (ref.is_module()) {
    const Module& child = ref.module();
    return Sym(g.create_get_attr_module(base, path, child.is_builtin() ? std::string(child.type_name()) : "Module", name));
  }
  const Tensor& t = ref.tensor();
  return Sym(g.create_get_attr_tensor(base, path, t.shape(), t.dtype(), name));
}

/// A call of a module node inside insert_exprs: a builtin module is one opaque call (its output
/// shape from Module::infer_shape_erased); a traced module is called with a signature it has a
/// graph for. Returns the call's first output.
template <class... A>
Sym call(const Sym& module, const A&... args) {
  Recorder& r = Recorder::current("tmod::graph::call");
  Graph& g = r.graph();
  detail::require_node_of(g, module.node(), "call");
  if (module.is_tensor()) throw graph_error("call: " + module.describe() + " is a tensor, not a module");
  auto* callee = static_cast<ModuleNode*>(module.node());
  const Module* m = callee->owner();
  if (m == nullptr) throw graph_error("call: the module of " + module.describe() + " is not at hand");
  const std::vector<CallArg> call_args{detail::to_arg(r, args)...};
  const std::string signature = detail::signature_of(args...);
  std::vector<std::pair<Shape, DType>> outs;
  if (m->is_builtin()) {
    std::vector<Shape> shapes;
    for (const CallArg& a : call_args) {
      const auto* n = std::get_if<Node*>(&a);
      if (n == nullptr || !(*n)->is_tensor())
        throw graph_error("call: the builtin " + std::string(m->type_name()) + " takes tensors only");
      shapes.push_back(static_cast<const TensorNode*>(*n)->shape());
    }
    outs.emplace_back(m->infer_shape_erased(shapes), DType::float32);
  } else {
    const auto* holder = dynamic_cast<const GraphHolder*>(m);
    const Graph* sub = holder != nullptr ? holder->graph_for(signature) : nullptr;
    if (holder == nullptr)
      throw graph_error("call: " + module.describe() + " is a " + std::string(m->type_name()) +
                        " user module, traced when called with its type: call the module itself on Syms, e.g. "
                        "traced.getattr(path).as<" + std::string(m->type_name()) + ">()(tmod::Sym(x))");
    if (sub == nullptr)
      throw graph_error("call: " + module.describe() + " (" + std::string(m->type_name()) +
                        ") has no graph for forward" + signature);
    detail::require_traced_inputs(*sub, call_args, module.describe());
    for (const Node* n : sub->outputs()) {
      const auto* t = static_cast<const TensorNode*>(n);
      outs.emplace_back(t->shape(), t->dtype());
    }
  }
  return Sym(g.create_module_call(callee, call_args, signature, outs)->output());
}

}  // namespace tracemod::graph
