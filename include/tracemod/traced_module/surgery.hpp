// Graph surgery (MegEngine's InternalGraph.insert_exprs, replace_node, add_input_node,
// add_output_node, reset_outputs): editing a traced graph in place.
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

/// Access to a graph's expr list for the splicing surgery does.
struct graph_access {
  static Graph::expr_list& exprs(Graph& g) noexcept { return g.exprs_; }
};

namespace detail {

inline Graph& root_graph(Graph& g) noexcept {
  Graph* r = &g;
  while (r->top_graph() != nullptr) r = r->top_graph();
  return *r;
}

/// Debug builds verify every invariant of the whole hierarchy after each surgery call.
inline void check_after_surgery([[maybe_unused]] Graph& g) {
#ifndef NDEBUG
  check(root_graph(g));
#endif
}

/// The next (node id, expr id) of the hierarchy `g` belongs to: the top traced module's count
/// (MegEngine's _total_ids, O(1)) when it is consistent with `g`, else a scan of the hierarchy.
inline std::pair<std::int64_t, std::int64_t> next_ids(Graph& g) {
  auto* top = dynamic_cast<TracedModule*>(root_graph(g).owner());
  std::int64_t local_node = -1, local_expr = -1;
  for (const Expr* e : g.exprs(false)) {
    local_expr = std::max(local_expr, e->id());
    for (const Node* n : e->outputs()) local_node = std::max(local_node, n->id());
  }
  if (top != nullptr && top->is_top() && top->total_ids().first > local_node && top->total_ids().second > local_expr)
    return top->total_ids();
  std::int64_t next_node = 0, next_expr = 0;
  for (const Expr* e : root_graph(g).exprs(true)) {
    next_expr = std::max(next_expr, e->id() + 1);
    for (const Node* n : e->outputs()) next_node = std::max(next_node, n->id() + 1);
  }
  return {next_node, next_expr};
}

/// Records the ids handed out in the top traced module's count.
inline void set_next_ids(Graph& g, std::pair<std::int64_t, std::int64_t> next) {
  if (auto* top = dynamic_cast<TracedModule*>(root_graph(g).owner()); top != nullptr && top->is_top())
    top->set_total_ids(next);
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

/// Input and output surgery changes the module's call interface: only the top graph's is free.
inline void require_top_graph(const Graph& g, std::string_view what) {
  if (g.top_graph() != nullptr)
    throw graph_error(std::string(what) + " only supports the top graph; " + g.name() + ".Graph is called from " +
                      g.top_graph()->name() + ".Graph");
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
    auto& list = graph_access::exprs(g);
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
    auto& list = graph_access::exprs(graph_);
    return last_old_ ? std::next(*last_old_) : list.begin();
  }

  // ---- ModuleTracer: user modules called in the scope --------------------------------------------
  Graph* find_graph(const Module& module, const std::string& signature) override {
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
    auto& list = graph_access::exprs(graph_);
    // Last first: a new expr's outputs are used by later new exprs only.
    while (first_new() != list.end()) {
      Expr* e = list.back().get();
      for (Node* in : e->inputs()) {
        auto& users = node_access::users(*in);
        users.erase(std::find(users.begin(), users.end(), e));
      }
      for (Node* out : e->outputs()) graph_.names().release(out->name());
      list.pop_back();
    }
    graph_.changed();
  }

  void commit() noexcept {
    // The traced trees of user modules called in the scope replace the modules (whose sub-graphs are
    // compiled as trace_module compiles every graph).
    for (auto& [path, tree] : converted_) graph_.owner()->setattr(path, std::unique_ptr<Module>(std::move(tree)));
    for (Graph* sub : new_graphs_) sub->compile();
    auto& list = graph_access::exprs(graph_);
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
    auto [next_node, next_expr] = detail::next_ids(graph_);
    for (const auto& up : list)
      if (fresh.count(up.get()) != 0) {
        expr_access::set_id(*up, next_expr++);
        for (Node* n : up->outputs()) node_access::set_id(*n, next_node++);
      }
    for (const Graph* sub : new_graphs_)
      for (Expr* e : sub->exprs(false)) {
        expr_access::set_id(*e, next_expr++);
        for (Node* n : e->outputs()) node_access::set_id(*n, next_node++);
      }
    detail::set_next_ids(graph_, {next_node, next_expr});
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
    const bool used = !node_access::users(*from).empty();
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
    std::vector<Expr*> users = node_access::users(*from);
    users.erase(std::unique(users.begin(), users.end()), users.end());
    for (Expr* u : users) {
      if (!from_input && g.position(u) <= index) continue;
      if (deps.count(u) != 0) continue;
      for (Node*& in : expr_access::inputs(*u))
        if (in == from) {
          in = to;
          auto& fu = node_access::users(*from);
          fu.erase(std::find(fu.begin(), fu.end(), u));
          node_access::users(*to).push_back(u);
        }
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
  for (Node* in : e.inputs()) {
    auto& users = node_access::users(*in);
    users.erase(std::find(users.begin(), users.end(), &e));
  }
  for (Node* in : scratch->inputs())
    *std::find(node_access::users(*in).begin(), node_access::users(*in).end(), scratch) = &e;
  expr_access::inputs(e) = std::move(expr_access::inputs(*scratch));
  expr_access::inputs(*scratch).clear();
  expr_access::args(e) = std::move(expr_access::args(*scratch));
  expr_access::kwargs(e) = std::move(expr_access::kwargs(*scratch));
  expr_access::invalidate_params(e);
  g.erase(scratch);
  detail::check_after_surgery(g);
}

/// Adds a tensor input to the top graph: the module then takes one more argument.
inline TensorNode* add_input_node(Graph& g, const Shape& shape, DType dtype, std::string_view name) {
  detail::require_top_graph(g, "add_input_node");
  auto [next_node, next_expr] = detail::next_ids(g);
  TensorNode* n = g.add_tensor_input(name, shape, dtype);
  node_access::set_id(*n, next_node++);
  expr_access::set_id(*n->expr(), next_expr++);
  detail::set_next_ids(g, {next_node, next_expr});
  detail::check_after_surgery(g);
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
inline InsertScope Graph::insert_exprs(const Expr* after) { return graph::insert_exprs(*this, after); }
inline void Graph::replace_node(const std::vector<std::pair<Node*, Node*>>& repl) { graph::replace_node(*this, repl); }
inline TensorNode* Graph::add_input_node(const Shape& shape, DType dtype, std::string_view name) {
  return graph::add_input_node(*this, shape, dtype, name);
}
inline void Graph::add_output_node(Node* node) { graph::add_output_node(*this, node); }
inline void Graph::reset_outputs(NodeTree outputs) { graph::reset_outputs(*this, std::move(outputs)); }

}  // namespace tracemod::graph
