// Graph (MegEngine's InternalGraph): the exprs of one forward in execution order, its inputs (the
// first is `self`) and its outputs (a nested structure of nodes). A graph belongs to a traced module
// (its owner); a call of a user module refers to the callee's graph, so the graphs of a traced module
// hierarchy form a tree walked by the recursive queries.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/graph/expr.hpp>
#include <tracemod/graph/filter.hpp>
#include <tracemod/graph/namespace.hpp>
#include <tracemod/graph/node.hpp>
#include <tracemod/graph/node_tree.hpp>
#include <tracemod/nn/module.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tracemod::graph {

class Graph;
class ExecutionPlan;
class InsertScope;
struct RunHooks;

/// Implemented by the module that owns graphs (TracedModule): finds the graph for a call signature.
class GraphHolder {
 public:
  /// The graph for a call signature; null if the module was never called that way.
  [[nodiscard]] virtual Graph* graph_for(std::string_view signature) const = 0;
  /// The (node, expr) id count of the hierarchy this module is the top of (MegEngine's _total_ids),
  /// which IdAllocator reads and advances; null when this module keeps no count.
  [[nodiscard]] virtual std::pair<std::int64_t, std::int64_t>* id_count() noexcept { return nullptr; }

 protected:
  ~GraphHolder() = default;
};


class Graph {
 public:
  using expr_list = std::list<std::unique_ptr<Expr>>;

  Graph(std::string name, std::string qualname, Module* owner)
      : name_(std::move(name)), qualname_(std::move(qualname)), owner_(owner) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  /// Printed as `<name>.Graph`; sub-graphs are named `<Parent>_<attr>`.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// The dotted module path ("ResNet.layer1").
  [[nodiscard]] const std::string& qualname() const noexcept { return qualname_; }
  /// The traced module whose forward this graph records (`self`).
  [[nodiscard]] Module* owner() const noexcept { return owner_; }
  /// The graph whose call reaches this one; null for the top graph.
  [[nodiscard]] Graph* top_graph() const noexcept { return parent_; }

  /// Graph inputs: `self` first, then one node per tensor argument.
  [[nodiscard]] std::vector<Node*> inputs() const {
    std::vector<Node*> v;
    v.reserve(inputs_.size());
    for (const auto& e : inputs_) v.push_back(e->output());
    return v;
  }
  /// The output nodes, flattened depth-first.
  [[nodiscard]] std::vector<Node*> outputs() const {
    std::vector<Node*> v;
    outputs_.flatten(v);
    return v;
  }
  [[nodiscard]] const NodeTree& output_tree() const noexcept { return outputs_; }

  /// This graph's exprs in execution order (Input exprs first); with `recursive`, each user-module
  /// call is followed by its callee graph's exprs (every graph once).
  [[nodiscard]] ExprFilter exprs(bool recursive = true) const;
  /// The outputs of exprs(recursive), in that order.
  [[nodiscard]] NodeFilter nodes(bool recursive = true) const;
  /// The graphs reachable from this one through calls (this one first), each once, in call order.
  [[nodiscard]] std::vector<Graph*> graphs(bool recursive = true) const;

  // ---- queries (MegEngine's get_*_by_*) ----------------------------------------------------------
  template <functional::op_definition Op>
  [[nodiscard]] ExprFilter get_function_by_type(const Op& op, bool recursive = true) const {
    return exprs(recursive).call_function(op);
  }
  [[nodiscard]] ExprFilter get_function_by_type(std::string_view target, bool recursive = true) const {
    return exprs(recursive).call_function(target);
  }
  [[nodiscard]] ExprFilter get_method_by_type(std::string_view method, bool recursive = true) const {
    return exprs(recursive).call_method(method);
  }
  template <class M>
  [[nodiscard]] NodeFilter get_module_by_type(bool recursive = true) const {
    return nodes(recursive).module_type<M>();
  }
  [[nodiscard]] NodeFilter get_node_by_id(std::int64_t id, bool recursive = true) const {
    return nodes(recursive).with_ids({id});
  }
  [[nodiscard]] NodeFilter get_node_by_id(const std::vector<std::int64_t>& ids, bool recursive = true) const {
    return nodes(recursive).with_ids(ids);
  }
  [[nodiscard]] ExprFilter get_expr_by_id(std::int64_t id, bool recursive = true) const {
    return exprs(recursive).with_ids({id});
  }
  [[nodiscard]] ExprFilter get_expr_by_id(const std::vector<std::int64_t>& ids, bool recursive = true) const {
    return exprs(recursive).with_ids(ids);
  }
  /// Nodes whose "<graph name>_<node name>" (or own name) matches a glob.
  [[nodiscard]] NodeFilter get_node_by_name(std::string_view pattern, bool ignorecase = true,
                                            bool recursive = true) const {
    return nodes(recursive).name_matches(pattern, ignorecase);
  }

  // ---- running -----------------------------------------------------------------------------------
  /// Runs the graph on `self` and one value per non-self input; returns one value per output leaf.
  /// The first run compiles an execution plan; any change to the graph invalidates it. Runs may
  /// overlap (several threads at once); a change to the graph may not overlap a run.
  std::vector<NodeValue> run(const Module& self, std::span<const NodeValue> inputs,
                             const RunHooks* hooks = nullptr) const;
  /// The most bytes of tensors the interpreter held at once during the run of this graph that
  /// finished last (graph inputs and module attributes excluded).
  [[nodiscard]] std::size_t peak_live_bytes() const noexcept;
  /// How many execution plans this graph has built (its sub-graphs count their own): one until the
  /// graph changes, however many input shapes a graph with dynamic dims runs at.
  [[nodiscard]] std::size_t plans_built() const noexcept { return plans_built_.load(std::memory_order_relaxed); }
  /// Runs on the graph's owner with tensors; returns the nested output (a Tensor for one output).
  template <class... T>
    requires(std::convertible_to<const T&, Value> && ...)
  Value eval(const T&... inputs) const {
    const std::vector<NodeValue> in{NodeValue(Value(inputs))...};
    return pack_outputs(run(*owner_, in));
  }
  /// The graph and the graphs it calls in Graphviz's DOT language (graph/dot.hpp).
  [[nodiscard]] std::string to_dot() const;
  /// The nested output Value of run()'s flat results.
  [[nodiscard]] Value pack_outputs(const std::vector<NodeValue>& flat) const;

  // ---- surgery (graph/surgery.hpp) --------------------------------------------------------------
  /// An RAII scope in which tmod::Sym arguments record new exprs, spliced in after `after` (or after
  /// the last producer they use) when the scope ends; an exception leaves the graph as it was. The
  /// scope records through the tracer: calling this needs <tracemod/traced_module/surgery.hpp>.
  template <class Scope = InsertScope>
  [[nodiscard]] Scope insert_exprs(const Expr* after = nullptr);
  /// Rewires the users of each `old` that come after `new`'s producer (MegEngine's replace_node).
  void replace_node(const std::vector<std::pair<Node*, Node*>>& repl);
  /// Adds a tensor input to the top graph.
  TensorNode* add_input_node(const Shape& shape, DType dtype = DType::float32, std::string_view name = "args");
  /// Appends an output to the top graph: the outputs become `(old outputs, node)`.
  void add_output_node(Node* node);
  /// Replaces the top graph's outputs by a nested structure of its nodes.
  void reset_outputs(NodeTree outputs);

  /// A deep copy owned by `owner`: same exprs, nodes, names, ids and outputs (sub-graphs are reached
  /// through `owner`'s attributes, so they are copied with the module tree, not here).
  [[nodiscard]] std::unique_ptr<Graph> clone(Module* owner) const;

  /// Marks the graph changed: drops the execution plan (and the owner's id bookkeeping stays valid).
  void changed() const noexcept;

  // ---- internal structure (recorder, surgery, flatten, serialization) -----------------------------
  [[nodiscard]] const expr_list& expr_list_() const noexcept { return exprs_; }
  [[nodiscard]] NameSpace& names() noexcept { return ns_; }
  [[nodiscard]] const NameSpace& names() const noexcept { return ns_; }
  void set_owner(Module* owner) noexcept { owner_ = owner; }
  void set_parent(Graph* parent) noexcept { parent_ = parent; }
  void rename_graph(std::string name, std::string qualname) {
    name_ = std::move(name);
    qualname_ = std::move(qualname);
  }

  /// Adds the `self` input (first) or a tensor input; names are made unique.
  ModuleNode* add_self_input(std::string module_type);
  TensorNode* add_tensor_input(std::string_view name, const Shape& shape, DType dtype);
  /// Creates exprs at the insertion point (the end unless set_insert_point moved it).
  ModuleNode* create_get_attr_module(Node* base, std::string path, std::string module_type, std::string_view node_name);
  TensorNode* create_get_attr_tensor(Node* base, std::string path, const Shape& shape, DType dtype,
                                     std::string_view node_name);
  TensorNode* create_constant(const Tensor& value, std::string_view node_name = "const_tensor");
  /// A call of a registered op: `operands` per op operand (node, node list or constant), `params` in
  /// canonical order. The output shape and dtype are inferred by the op.
  Expr* create_op_call(const functional::op_entry& op, const std::vector<CallArg>& operands,
                       const std::vector<Value>& params);
  /// A call of a module: args are the call's arguments (nodes or constants), outputs one tensor node
  /// per (shape, dtype).
  Expr* create_module_call(ModuleNode* callee, const std::vector<CallArg>& args, std::string signature,
                           const std::vector<std::pair<Shape, DType>>& outputs);
  void set_outputs(NodeTree tree);

  /// A copy of `src` (an expr of another graph) whose inputs are `map(src input)`; its outputs are
  /// named `<prefix><old name>`, made unique, and keep their qualnames.
  Expr* copy_expr(const Expr& src, const std::function<Node*(const Node*)>& map, std::string_view prefix);
  /// Points every use of `from` (users and outputs) at `to`; `from` keeps no users.
  void replace_all_uses(Node* from, Node* to);
  /// Renames a node to a unique name derived from `base` (releasing its old name).
  void rename_unique(Node* n, std::string_view base);

  /// Merges getattr chains into dotted paths (`getattr(self, "layer1.0.conv1")`) and duplicate
  /// getattrs into the first one, then deletes every expr the outputs do not depend on (their
  /// names become free again). Not recursive: each graph is compiled on its own.
  void compile();
  /// Renames the graph (MegEngine's `graph.name = ...`). A sub-graph's name lives in its parent's
  /// namespace (a taken name is refused) and its qualname, a module path, stays. The top graph's
  /// name is the root of every qualname: they all change with it ("ResNet.layer1" -> "Top.layer1").
  /// A non-identifier is refused; on a graph_error nothing changes.
  void set_name(const std::string& name);

  /// Where create_* put new exprs: before `pos` (end() appends).
  void set_insert_point(expr_list::const_iterator pos) { insert_point_ = pos; }
  void reset_insert_point() { insert_point_.reset(); }
  /// Removes an expr with no remaining users of its outputs; releases its names.
  void erase(Expr* e);
  /// Points every use of `from` by `user` at `to` (once per use).
  void rewire(Expr* user, Node* from, Node* to);
  /// Gives `e` the inputs and arguments of `donor`, a call of the same op made to validate them,
  /// and erases `donor` (set_args_kwargs).
  void take_arguments(Expr& e, Expr& donor);
  /// The position of every expr in execution order (recomputed after changes).
  [[nodiscard]] std::size_t position(const Expr* e) const;
  [[nodiscard]] expr_list::const_iterator iterator_of(const Expr* e) const;
  [[nodiscard]] bool contains(const Expr* e) const { return e != nullptr && e->top_graph() == this && position(e) != npos; }
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

 private:
  friend class ExecutionPlan;
  friend class InsertScope;  // splices the exprs it recorded into place

  Expr* insert(std::unique_ptr<Expr> e);
  /// Unlinks the expr at `it` from its inputs' users, releases its output names and deletes it;
  /// returns the expr after it. Its outputs must have no users left.
  expr_list::iterator detach(expr_list::const_iterator it);
  /// The execution plan, built by the first caller while concurrent callers wait.
  [[nodiscard]] std::shared_ptr<const ExecutionPlan> plan() const;
  /// An expr of graph `g` with src's kind, target, op, arguments and constants, but no inputs or
  /// outputs yet (clone and copy_expr fill those in).
  static std::unique_ptr<Expr> copy_call_fields(const Expr& src, Graph* g);
  /// A node of graph `g` with n's kind, shape, dtype, qparams or module type, and qualname.
  static std::unique_ptr<Node> copy_node(const Node& n, Graph* g, std::string name);
  std::string auto_name(std::string_view base, const void* owner) { return ns_.create_unique_name(base, owner); }

  std::string name_;
  std::string qualname_;
  Module* owner_;
  Graph* parent_ = nullptr;
  std::vector<std::unique_ptr<Expr>> inputs_;  // Input exprs
  expr_list exprs_;
  NodeTree outputs_;
  NameSpace ns_;
  std::optional<expr_list::const_iterator> insert_point_;
  mutable std::mutex positions_mutex_;  // guards the lazily built positions_: queries may overlap
  mutable std::unordered_map<const Expr*, std::size_t> positions_;
  mutable bool positions_valid_ = false;
  mutable std::mutex plan_mutex_;  // guards plan_: concurrent runs share one plan
  mutable std::shared_ptr<const ExecutionPlan> plan_;
  mutable std::atomic<std::size_t> plans_built_{0};
};


/// The top graph of the hierarchy `g` belongs to.
inline Graph& root_graph(Graph& g) noexcept {
  Graph* r = &g;
  while (r->top_graph() != nullptr) r = r->top_graph();
  return *r;
}

inline Module* ModuleNode::owner() const {
  // Walks the getattr chain up to its root iteratively (a hostile or unmerged chain may be long),
  // then resolves the paths downwards from the root's module.
  std::vector<const Expr*> chain;
  const Node* n = this;
  Module* root = nullptr;
  while (true) {
    const Expr* e = n->expr();
    if (e == nullptr) return nullptr;
    if (e->kind() == ExprKind::input) {
      root = n->top_graph()->owner();
      break;
    }
    if (e->kind() == ExprKind::constant) {
      root = const_cast<Module*>(e->const_module());
      break;
    }
    if (e->kind() != ExprKind::get_attr || e->inputs().empty() || e->inputs().front()->kind() != Kind::module)
      return nullptr;
    chain.push_back(e);
    n = e->inputs().front();
  }
  Module* m = root;
  for (auto it = chain.rbegin(); it != chain.rend() && m != nullptr; ++it) {
    if (!m->has_attr((*it)->name())) return nullptr;
    AttrRef ref = m->getattr((*it)->name());
    m = ref.kind() == member_kind::module ? &ref.module() : nullptr;
  }
  return m;
}

// ---- Expr -----------------------------------------------------------------------------------------

inline Expr::~Expr() = default;

inline void Expr::add_input(Node* n) {
  inputs_.push_back(n);
  n->users_.push_back(this);
}

inline Node* Expr::add_output(std::unique_ptr<Node> n) {
  n->expr_ = this;
  outputs_.push_back(std::move(n));
  return outputs_.back().get();
}

inline CallArg Expr::materialize(const Slot& s) const {
  switch (s.kind) {
    case Slot::Kind::node: return inputs_[s.inputs.front()];
    case Slot::Kind::node_list: {
      std::vector<Node*> v;
      for (std::size_t i : s.inputs) v.push_back(inputs_[i]);
      return v;
    }
    case Slot::Kind::constant: return s.value;
  }
  return Value{};
}

inline std::vector<CallArg> Expr::args() const {
  std::vector<CallArg> v;
  for (const Slot& s : args_) v.push_back(materialize(s));
  return v;
}

inline std::vector<std::pair<std::string, CallArg>> Expr::kwargs() const {
  std::vector<std::pair<std::string, CallArg>> v;
  for (const auto& [k, s] : kwargs_) v.emplace_back(k, materialize(s));
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return v;
}

inline std::vector<std::pair<std::string, CallArg>> Expr::named_args() const {
  std::vector<std::pair<std::string, CallArg>> v;
  for (std::size_t i = 0; i < args_.size(); ++i) {
    std::string name;
    if (op_ != nullptr) {
      name = i < op_->operands.size() ? std::string(op_->operands[i].name) : op_->params[i - op_->operands.size()].name;
    } else {
      name = i == 0 ? "self" : std::to_string(i - 1);
    }
    v.emplace_back(std::move(name), materialize(args_[i]));
  }
  for (const auto& [k, s] : kwargs_) v.emplace_back(k, materialize(s));
  return v;
}

inline std::vector<std::pair<std::size_t, Value>> Expr::const_val() const {
  std::vector<std::pair<std::size_t, Value>> v;
  std::size_t i = 0;
  for (const Slot& s : args_) {
    if (s.kind == Slot::Kind::constant) v.emplace_back(i, s.value);
    ++i;
  }
  for (const auto& kv : kwargs_) {
    if (kv.second.kind == Slot::Kind::constant) v.emplace_back(i, kv.second.value);
    ++i;
  }
  return v;
}

inline Expr::Operand Expr::operand(std::size_t i) const {
  using k = functional::erased_operand::kind;
  const Slot& a = args_[i];
  switch (a.kind) {
    case Slot::Kind::node: return {k::tensor, a.inputs, nullptr};
    case Slot::Kind::node_list: return {k::list, a.inputs, nullptr};
    case Slot::Kind::constant: break;
  }
  return {a.value.is_none() ? k::none : k::scalar, {}, &a.value};
}

inline std::vector<Value> Expr::params() const {
  std::vector<Value> values;
  if (op_ == nullptr) return values;
  for (std::size_t i = op_->operands.size(); i < args_.size(); ++i) values.push_back(args_[i].value);
  for (const auto& kv : kwargs_) values.push_back(kv.second.value);
  return values;
}

inline const void* Expr::op_params() const {
  functional::erased_params p = params_.load(std::memory_order_acquire);
  if (!p) {
    functional::erased_params made = op_->make_params(params());
    if (params_.compare_exchange_strong(p, made, std::memory_order_acq_rel)) p = std::move(made);
  }
  return p.get();  // params_ keeps it alive until the expr's arguments change
}

inline Module* Expr::callee() const {
  if (!is_module_call()) return nullptr;
  return static_cast<const ModuleNode*>(inputs_.front())->owner();
}

inline Graph* Expr::graph() const {
  const auto* holder = dynamic_cast<const GraphHolder*>(callee());
  return holder != nullptr ? holder->graph_for(signature_) : nullptr;
}

// ---- Graph ----------------------------------------------------------------------------------------

inline Graph::~Graph() {
  // Exprs are destroyed last-first so that no node is destroyed while a later expr still lists it.
  while (!exprs_.empty()) exprs_.pop_back();
}

inline Expr* Graph::insert(std::unique_ptr<Expr> e) {
  Expr* raw = e.get();
  if (insert_point_)
    exprs_.insert(*insert_point_, std::move(e));
  else
    exprs_.push_back(std::move(e));
  changed();
  return raw;
}

inline void Graph::changed() const noexcept {
  {
    const std::lock_guard lock(positions_mutex_);
    positions_valid_ = false;
  }
  const std::lock_guard lock(plan_mutex_);
  plan_.reset();
}

inline std::size_t Graph::position(const Expr* e) const {
  const std::lock_guard lock(positions_mutex_);
  if (!positions_valid_) {
    positions_.clear();
    std::size_t i = 0;
    for (const auto& x : exprs_) positions_[x.get()] = i++;
    positions_valid_ = true;
  }
  const auto it = positions_.find(e);
  return it == positions_.end() ? npos : it->second;
}

inline Graph::expr_list::const_iterator Graph::iterator_of(const Expr* e) const {
  return std::find_if(exprs_.begin(), exprs_.end(), [&](const auto& x) { return x.get() == e; });
}






inline Value Graph::pack_outputs(const std::vector<NodeValue>& flat) const {
  std::size_t next = 0;
  return outputs_.unflatten(
      [&](std::size_t i) -> Value {
        if (const Value* v = std::get_if<Value>(&flat[i])) return *v;
        throw graph_error(name_ + ".Graph: output " + std::to_string(i) + " is a module, not a value");
      },
      next);
}

}  // namespace tracemod::graph

// The definitions of building, editing and walking; running a graph needs the interpreter: every user of
// Graph gets them all, and Graph::to_dot()'s definition (dot.hpp, which needs the printer, so the
// printer includes it at its end).
#include <tracemod/graph/build.hpp>
#include <tracemod/graph/edit.hpp>
#include <tracemod/graph/walk.hpp>
#include <tracemod/graph/ids.hpp>
#include <tracemod/graph/surgery.hpp>
#include <tracemod/graph/interpreter.hpp>
#include <tracemod/graph/print.hpp>
