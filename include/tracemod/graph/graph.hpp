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
#include <tracemod/nn/module.hpp>

#include <algorithm>
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
#include <cstdint>
#include <utility>
#include <vector>

namespace tracemod::graph {

class Graph;
class ExecutionPlan;
class InsertScope;
struct RunHooks;

/// The nested output structure of a graph: a node, or a tuple/list/dict of such trees.
struct NodeTree {
  enum class Kind : std::uint8_t { leaf, tuple, list, dict };
  Kind kind = Kind::tuple;
  Node* node = nullptr;
  std::vector<NodeTree> children;
  std::vector<std::string> keys;  // dict only, parallel to children

  static NodeTree leaf(Node* n) { return {Kind::leaf, n, {}, {}}; }
  static NodeTree tuple(std::vector<NodeTree> c) { return {Kind::tuple, nullptr, std::move(c), {}}; }
  static NodeTree list(std::vector<NodeTree> c) { return {Kind::list, nullptr, std::move(c), {}}; }
  static NodeTree dict(std::vector<std::pair<std::string, NodeTree>> items) {
    NodeTree t{Kind::dict, nullptr, {}, {}};
    for (auto& [k, v] : items) {
      t.keys.push_back(k);
      t.children.push_back(std::move(v));
    }
    return t;
  }
  /// The leaves, depth-first.
  void flatten(std::vector<Node*>& out) const {
    if (kind == Kind::leaf) {
      out.push_back(node);
      return;
    }
    for (const NodeTree& c : children) c.flatten(out);
  }
  /// Builds the matching Value from leaf values in flatten() order.
  template <class LeafValue>
  Value unflatten(LeafValue&& leaf_value, std::size_t& next) const {
    switch (kind) {
      case Kind::leaf: return leaf_value(next++);
      case Kind::tuple:
      case Kind::list: {
        ValueList items;
        for (const NodeTree& c : children) items.push_back(c.unflatten(leaf_value, next));
        return kind == Kind::tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
      }
      case Kind::dict: {
        ValueDict items;
        for (std::size_t i = 0; i < children.size(); ++i) items.emplace_back(keys[i], children[i].unflatten(leaf_value, next));
        return Value::dict(std::move(items));
      }
    }
    return {};
  }
  /// Replaces every leaf equal to `from` by `to`.
  void replace(const Node* from, Node* to) {
    if (kind == Kind::leaf) {
      if (node == from) node = to;
      return;
    }
    for (NodeTree& c : children) c.replace(from, to);
  }
};

/// Implemented by the module that owns graphs (TracedModule): finds the graph for a call signature.
class GraphHolder {
 public:
  /// The graph for a call signature; null if the module was never called that way.
  [[nodiscard]] virtual Graph* graph_for(std::string_view signature) const = 0;

 protected:
  ~GraphHolder() = default;
};

/// Low-level access for the layers that build and edit graphs (recorder, surgery, flatten, io).
struct node_access;
struct expr_access;
struct graph_access;

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

  // ---- surgery (DESIGN.md's member spelling; defined in traced_module/surgery.hpp, which
  // <tracemod/traced_module.hpp> includes: surgery needs the traced module's id counters) ----------
  /// An RAII scope in which tmod::Sym arguments record new exprs, spliced in after `after` (or after
  /// the last producer they use) when the scope ends; an exception leaves the graph as it was.
  [[nodiscard]] InsertScope insert_exprs(const Expr* after = nullptr);
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
  /// The position of every expr in execution order (recomputed after changes).
  [[nodiscard]] std::size_t position(const Expr* e) const;
  [[nodiscard]] expr_list::const_iterator iterator_of(const Expr* e) const;
  [[nodiscard]] bool contains(const Expr* e) const { return e != nullptr && e->top_graph() == this && position(e) != npos; }
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

 private:
  friend class ExecutionPlan;
  friend struct expr_access;
  friend struct graph_access;

  Expr* insert(std::unique_ptr<Expr> e);
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
  mutable std::unordered_map<const Expr*, std::size_t> positions_;
  mutable bool positions_valid_ = false;
  mutable std::mutex plan_mutex_;  // guards plan_: concurrent runs share one plan
  mutable std::shared_ptr<const ExecutionPlan> plan_;
};

// ---- Node -----------------------------------------------------------------------------------------

inline void Node::set_name(const std::string& name) {
  if (name == name_) return;
  NameSpace& ns = graph_->names();
  if (ns.taken(name))
    throw graph_error("Node.set_name: the name '" + name + "' is already used in " + graph_->name() + ".Graph");
  if (NameSpace::sanitize(name) != name || NameSpace::is_reserved(name))
    throw graph_error("Node.set_name: '" + name + "' is not a valid node name (an identifier that is no C++ keyword)");
  ns.release(name_);
  ns.claim(name, this);
  name_ = name;
  graph_->changed();
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

inline const void* Expr::op_params() const {
  if (!params_) {
    std::vector<Value> values;
    for (std::size_t i = op_->operands.size(); i < args_.size(); ++i) values.push_back(args_[i].value);
    for (const auto& kv : kwargs_) values.push_back(kv.second.value);
    params_ = op_->make_params(values);
  }
  return params_.get();
}

inline Graph* Expr::graph() const {
  if (!is_module_call()) return nullptr;
  const auto* callee = static_cast<const ModuleNode*>(inputs_.front());
  const Module* m = callee->owner();
  const auto* holder = dynamic_cast<const GraphHolder*>(m);
  return holder != nullptr ? holder->graph_for(signature_) : nullptr;
}

inline void Expr::replace_inputs(Node* old_node, Node* new_node) {
  const auto where = [&] { return "Expr.replace_inputs (%" + std::to_string(id_) + ")"; };
  const auto it = std::find(inputs_.begin(), inputs_.end(), old_node);
  if (it == inputs_.end()) throw graph_error(where() + ": node '" + old_node->name() + "' is not an input of this expr");
  if (old_node->kind() != new_node->kind())
    throw graph_error(where() + ": node '" + new_node->name() + "' is of another kind than '" + old_node->name() + "'");
  if (new_node->top_graph() != graph_)
    throw graph_error(where() + ": node '" + new_node->name() + "' belongs to another graph");
  const Expr* producer = new_node->expr();
  if (producer->kind() != ExprKind::input && graph_->position(producer) >= graph_->position(this))
    throw graph_error(where() + ": node '" + new_node->name() + "' is produced after this expr");
  *it = new_node;
  auto& users = old_node->users_;
  users.erase(std::find(users.begin(), users.end(), this));
  new_node->users_.push_back(this);
  graph_->changed();
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
  positions_valid_ = false;
  const std::lock_guard lock(plan_mutex_);
  plan_.reset();
}

inline std::size_t Graph::position(const Expr* e) const {
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

inline ModuleNode* Graph::add_self_input(std::string module_type) {
  std::unique_ptr<Expr> e(new Expr(ExprKind::input, this));
  auto node = std::make_unique<ModuleNode>(this, auto_name("self", nullptr), std::move(module_type));
  auto* raw = static_cast<ModuleNode*>(e->add_output(std::move(node)));
  names().claim(raw->name(), raw);
  raw->qualname_ = qualname_;
  e->target_ = raw->name();
  inputs_.push_back(std::move(e));
  changed();
  return raw;
}

inline TensorNode* Graph::add_tensor_input(std::string_view name, const Shape& shape, DType dtype) {
  std::unique_ptr<Expr> e(new Expr(ExprKind::input, this));
  auto node = std::make_unique<TensorNode>(this, std::string(), shape, dtype);
  auto* raw = static_cast<TensorNode*>(e->add_output(std::move(node)));
  raw->name_ = auto_name(name, raw);
  raw->qualname_ = qualname_ + ".[" + raw->name_ + "]";
  e->target_ = raw->name_;
  inputs_.push_back(std::move(e));
  changed();
  return raw;
}

inline ModuleNode* Graph::create_get_attr_module(Node* base, std::string path, std::string module_type,
                                                 std::string_view node_name) {
  std::unique_ptr<Expr> e(new Expr(ExprKind::get_attr, this));
  e->add_input(base);
  e->target_ = std::move(path);
  auto* raw = static_cast<ModuleNode*>(e->add_output(std::make_unique<ModuleNode>(this, "", std::move(module_type))));
  raw->name_ = auto_name(node_name, raw);
  raw->qualname_ = base->qualname() + "." + e->target_;
  insert(std::move(e));
  return raw;
}

inline TensorNode* Graph::create_get_attr_tensor(Node* base, std::string path, const Shape& shape, DType dtype,
                                                 std::string_view node_name) {
  std::unique_ptr<Expr> e(new Expr(ExprKind::get_attr, this));
  e->add_input(base);
  e->target_ = std::move(path);
  auto* raw = static_cast<TensorNode*>(e->add_output(std::make_unique<TensorNode>(this, "", shape, dtype)));
  raw->name_ = auto_name(node_name, raw);
  raw->qualname_ = base->qualname() + "." + e->target_;
  insert(std::move(e));
  return raw;
}

inline TensorNode* Graph::create_constant(const Tensor& value, std::string_view node_name) {
  std::unique_ptr<Expr> e(new Expr(ExprKind::constant, this));
  e->const_tensor_ = value;
  auto* raw = static_cast<TensorNode*>(
      e->add_output(std::make_unique<TensorNode>(this, "", value.shape(), value.dtype())));
  raw->set_qparams(value.qparams());
  raw->name_ = auto_name(node_name, raw);
  raw->qualname_ = qualname_ + ".[" + raw->name_ + "]";
  insert(std::move(e));
  return raw;
}

namespace detail {

/// Records an argument into slot `s` of `e`, adding its nodes as inputs.
inline void fill_slot(const CallArg& arg, std::vector<Node*>& inputs, auto& slot) {
  using Slot = std::remove_cvref_t<decltype(slot)>;
  if (const auto* n = std::get_if<Node*>(&arg)) {
    slot.kind = Slot::Kind::node;
    slot.inputs = {inputs.size()};
    inputs.push_back(*n);
  } else if (const auto* l = std::get_if<std::vector<Node*>>(&arg)) {
    slot.kind = Slot::Kind::node_list;
    for (Node* x : *l) {
      slot.inputs.push_back(inputs.size());
      inputs.push_back(x);
    }
  } else {
    slot.kind = Slot::Kind::constant;
    slot.value = std::get<Value>(arg);
  }
}

inline std::string strip_underscores(std::string_view s) {
  while (!s.empty() && s.front() == '_') s.remove_prefix(1);
  while (!s.empty() && s.back() == '_') s.remove_suffix(1);
  return std::string(s);
}

}  // namespace detail



struct node_access {
  static void set_id(Node& n, std::int64_t id) { n.id_ = id; }
  static std::string& name(Node& n) { return n.name_; }
  static std::string& qualname(Node& n) { return n.qualname_; }
  static std::vector<Expr*>& users(Node& n) { return n.users_; }
  static void set_graph(Node& n, Graph* g) { n.graph_ = g; }
};

struct expr_access {
  static std::vector<Node*>& inputs(Expr& e) { return e.inputs_; }
  static auto& args(Expr& e) { return e.args_; }
  static auto& kwargs(Expr& e) { return e.kwargs_; }
  static std::vector<std::unique_ptr<Node>>& outputs(Expr& e) { return e.outputs_; }
  static void set_id(Expr& e, std::int64_t id) { e.id_ = id; }
  static void set_graph(Expr& e, Graph* g) { e.graph_ = g; }
  static void invalidate_params(Expr& e) { e.invalidate_params(); }
  static std::string& target(Expr& e) { return e.target_; }
  static std::string& signature(Expr& e) { return e.signature_; }
  static void finish_inputs(Expr& e) {
    for (Node* n : e.inputs_) node_access::users(*n).push_back(&e);
  }
};



inline Expr* Graph::create_op_call(const functional::op_entry& op, const std::vector<CallArg>& operands,
                                   const std::vector<Value>& params) {
  const auto where = [&] { return op.target; };
  if (operands.size() != op.operands.size())
    throw graph_error(where() + ": expected " + std::to_string(op.operands.size()) + " operands, got " +
                      std::to_string(operands.size()));
  if (params.size() != op.params.size())
    throw graph_error(where() + ": expected " + std::to_string(op.params.size()) + " params, got " +
                      std::to_string(params.size()));
  std::unique_ptr<Expr> e(new Expr(op.kind == functional::call_kind::method ? ExprKind::call_method
                                                                             : ExprKind::call_function,
                                   this));
  e->op_ = &op;
  e->target_ = op.target;
  std::vector<Node*> inputs;
  e->args_.resize(operands.size());
  for (std::size_t i = 0; i < operands.size(); ++i) detail::fill_slot(operands[i], inputs, e->args_[i]);
  for (std::size_t i = 0; i < params.size(); ++i) {
    Expr::Slot s;
    s.kind = Expr::Slot::Kind::constant;
    s.value = params[i];
    if (op.params[i].keyword_only)
      e->kwargs_.emplace_back(op.params[i].name, std::move(s));
    else
      e->args_.push_back(std::move(s));
  }
  for (Node* n : inputs)
    if (n->top_graph() != this)
      throw graph_error(where() + ": input node '" + n->name() + "' belongs to " + n->top_graph()->name() +
                        ".Graph, not to " + name_ + ".Graph");
  // Shape and dtype inference (throws like the eager call would).
  std::vector<functional::erased_shape> shapes(operands.size());
  std::vector<std::vector<Shape>> lists(operands.size());
  std::vector<DType> dtypes;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Expr::Slot& s = e->args_[i];
    auto& sh = shapes[i];
    using k = functional::erased_operand::kind;
    if (s.kind == Expr::Slot::Kind::node) {
      const Node* n = inputs[s.inputs.front()];
      if (!n->is_tensor()) throw graph_error(where() + ": operand '" + std::string(op.operands[i].name) + "' is a module");
      sh.k = k::tensor;
      sh.shape = static_cast<const TensorNode*>(n)->shape();
      dtypes.push_back(static_cast<const TensorNode*>(n)->dtype());
    } else if (s.kind == Expr::Slot::Kind::node_list) {
      for (std::size_t j : s.inputs) {
        const Node* n = inputs[j];
        if (!n->is_tensor()) throw graph_error(where() + ": a list operand holds a module");
        lists[i].push_back(static_cast<const TensorNode*>(n)->shape());
        dtypes.push_back(static_cast<const TensorNode*>(n)->dtype());
      }
      sh.k = k::list;
      sh.list = lists[i];
    } else if (s.value.is_none()) {
      sh.k = k::none;
    } else if (s.value.is_number()) {
      sh.k = k::scalar;
    } else if (s.value.is_tensor()) {
      throw graph_error(where() + ": a tensor operand must be a node (record it as a Constant first)");
    } else {
      throw graph_error(where() + ": operand '" + std::string(op.operands[i].name) + "' cannot be " + s.value.repr());
    }
  }
  const void* p = e->op_params();
  const Shape out_shape = op.infer_shape(p, shapes);
  const DType out_dtype = op.infer_dtype(dtypes);
  // Commit: nothing below throws.
  e->inputs_ = inputs;
  for (Node* n : inputs) n->users_.push_back(e.get());
  auto* out = static_cast<TensorNode*>(e->add_output(std::make_unique<TensorNode>(this, "", out_shape, out_dtype)));
  const bool method = op.kind == functional::call_kind::method;
  out->name_ = auto_name((method ? detail::strip_underscores(op.name) : op.name) + "_out", out);
  out->qualname_ = qualname_ + (method ? ".[method_" : ".[func_") + detail::strip_underscores(op.name) + "]";
  return insert(std::move(e));
}

inline Expr* Graph::create_module_call(ModuleNode* callee, const std::vector<CallArg>& args, std::string signature,
                                       const std::vector<std::pair<Shape, DType>>& outputs) {
  if (callee->top_graph() != this)
    throw graph_error("module call: the module node '" + callee->name() + "' belongs to another graph");
  std::unique_ptr<Expr> e(new Expr(ExprKind::call_method, this));
  e->target_ = "__call__";
  e->signature_ = std::move(signature);
  std::vector<Node*> inputs{callee};
  e->args_.resize(args.size() + 1);
  e->args_[0].kind = Expr::Slot::Kind::node;
  e->args_[0].inputs = {0};
  for (std::size_t i = 0; i < args.size(); ++i) detail::fill_slot(args[i], inputs, e->args_[i + 1]);
  for (Node* n : inputs)
    if (n->top_graph() != this)
      throw graph_error("module call '" + callee->name() + "': input node '" + n->name() + "' belongs to " +
                        n->top_graph()->name() + ".Graph, not to " + name_ + ".Graph");
  e->inputs_ = inputs;
  for (Node* n : inputs) n->users_.push_back(e.get());
  for (const auto& [shape, dtype] : outputs) {
    auto* out = static_cast<TensorNode*>(e->add_output(std::make_unique<TensorNode>(this, "", shape, dtype)));
    out->name_ = auto_name(callee->name() + "_out", out);
    out->qualname_ = callee->qualname() + ".[out]";
  }
  return insert(std::move(e));
}

inline void Graph::set_outputs(NodeTree tree) {
  std::vector<Node*> leaves;
  tree.flatten(leaves);
  for (Node* n : leaves)
    if (n == nullptr || n->top_graph() != this)
      throw graph_error(name_ + ".Graph: an output node belongs to another graph");
  outputs_ = std::move(tree);
  changed();
}

inline void Graph::erase(Expr* e) {
  if (e == nullptr) throw graph_error(name_ + ".Graph: cannot delete a null expr");
  const auto it = iterator_of(e);
  if (it == exprs_.end()) throw graph_error(name_ + ".Graph: expr %" + std::to_string(e->id()) + " is not in the graph");
  std::vector<Node*> outs;
  outputs_.flatten(outs);
  for (Node* out : e->outputs()) {
    if (!out->users().empty())
      throw graph_error(name_ + ".Graph: cannot delete %" + std::to_string(e->id()) + " while '" + out->name() +
                        "' still has users");
    if (std::find(outs.begin(), outs.end(), out) != outs.end())
      throw graph_error(name_ + ".Graph: cannot delete %" + std::to_string(e->id()) + ": '" + out->name() +
                        "' is an output of the graph");
  }
  for (Node* in : e->inputs_) {
    auto& u = in->users_;
    u.erase(std::find(u.begin(), u.end(), e));
  }
  for (const auto& out : e->outputs_) ns_.release(out->name());
  if (insert_point_ && *insert_point_ == it) insert_point_ = std::next(it);
  exprs_.erase(it);
  changed();
}

inline std::vector<Graph*> Graph::graphs(bool recursive) const {
  std::vector<Graph*> out{const_cast<Graph*>(this)};
  if (!recursive) return out;
  std::unordered_set<const Graph*> seen{this};
  // Iterative pre-order walk in call order (deep hierarchies must not exhaust the stack).
  std::vector<std::pair<const Graph*, expr_list::const_iterator>> stack{{this, exprs_.begin()}};
  while (!stack.empty()) {
    auto& [g, it] = stack.back();
    if (it == g->exprs_.end()) {
      stack.pop_back();
      continue;
    }
    const Expr* e = (it++)->get();
    if (Graph* sub = e->graph(); sub != nullptr && seen.insert(sub).second) {
      out.push_back(sub);
      stack.emplace_back(sub, sub->exprs_.begin());
    }
  }
  return out;
}

inline ExprFilter Graph::exprs(bool recursive) const {
  std::vector<Expr*> out;
  std::unordered_set<const Graph*> seen{this};
  const auto visit_inputs = [&](const Graph* g) {
    for (const auto& in : g->inputs_) out.push_back(in.get());
  };
  visit_inputs(this);
  std::vector<std::pair<const Graph*, expr_list::const_iterator>> stack{{this, exprs_.begin()}};
  while (!stack.empty()) {
    auto& [g, it] = stack.back();
    if (it == g->exprs_.end()) {
      stack.pop_back();
      continue;
    }
    Expr* e = (it++)->get();
    out.push_back(e);
    if (!recursive) continue;
    if (Graph* sub = e->graph(); sub != nullptr && seen.insert(sub).second) {
      visit_inputs(sub);
      stack.emplace_back(sub, sub->exprs_.begin());
    }
  }
  return ExprFilter(std::move(out));
}

inline NodeFilter Graph::nodes(bool recursive) const {
  std::vector<Node*> out;
  for (Expr* e : exprs(recursive))
    for (Node* n : e->outputs()) out.push_back(n);
  return NodeFilter(std::move(out));
}

inline std::unique_ptr<Graph> Graph::clone(Module* owner) const {
  auto g = std::make_unique<Graph>(name_, qualname_, owner);
  std::unordered_map<const Node*, Node*> map;
  const auto copy_expr = [&](const Expr& from) {
    std::unique_ptr<Expr> e = copy_call_fields(from, g.get());
    e->id_ = from.id_;
    for (const Node* in : from.inputs_) e->add_input(map.at(in));
    for (const auto& n : from.outputs_) {
      std::unique_ptr<Node> c = copy_node(*n, g.get(), n->name());
      node_access::set_id(*c, n->id());
      map[n.get()] = e->add_output(std::move(c));
    }
    return e;
  };
  for (const auto& in : inputs_) g->inputs_.push_back(copy_expr(*in));
  for (const auto& e : exprs_) g->exprs_.push_back(copy_expr(*e));
  g->outputs_ = outputs_;
  std::vector<Node*> old_leaves;
  outputs_.flatten(old_leaves);
  for (Node* n : old_leaves) g->outputs_.replace(n, map.at(n));
  for (const auto& [name, who] : ns_.entries()) {
    if (who == nullptr) continue;
    const auto it = map.find(static_cast<const Node*>(who));
    g->ns_.claim(name, it != map.end() ? static_cast<const void*>(it->second) : static_cast<const void*>(&g->ns_));
  }
  return g;
}

/// Renumbers every expr and node of the hierarchy under `root` in recursive execution order
/// (MegEngine's _reset_ids); returns (node count, expr count).
inline std::pair<std::int64_t, std::int64_t> reset_ids(Graph& root) {
  std::int64_t e = 0, n = 0;
  for (Expr* x : root.exprs(true)) {
    expr_access::set_id(*x, e++);
    for (Node* out : x->outputs()) node_access::set_id(*out, n++);
  }
  return {n, e};
}

inline std::unique_ptr<Expr> Graph::copy_call_fields(const Expr& src, Graph* g) {
  std::unique_ptr<Expr> e(new Expr(src.kind_, g));
  e->op_ = src.op_;
  e->target_ = src.target_;
  e->args_ = src.args_;
  e->kwargs_ = src.kwargs_;
  e->signature_ = src.signature_;
  e->const_tensor_ = src.const_tensor_;
  e->const_module_ = src.const_module_;
  e->params_ = src.params_;
  return e;
}

inline std::unique_ptr<Node> Graph::copy_node(const Node& n, Graph* g, std::string name) {
  std::unique_ptr<Node> c;
  if (n.is_tensor()) {
    const auto& t = static_cast<const TensorNode&>(n);
    auto tn = std::make_unique<TensorNode>(g, std::move(name), t.shape(), t.dtype());
    tn->set_qparams(t.qparams());
    c = std::move(tn);
  } else {
    c = std::make_unique<ModuleNode>(g, std::move(name), static_cast<const ModuleNode&>(n).module_type());
  }
  c->qualname_ = n.qualname();
  return c;
}

inline Expr* Graph::copy_expr(const Expr& src, const std::function<Node*(const Node*)>& map, std::string_view prefix) {
  std::unique_ptr<Expr> e = copy_call_fields(src, this);
  for (const Node* in : src.inputs_) e->add_input(map(in));
  for (const auto& n : src.outputs_) {
    Node* out = e->add_output(copy_node(*n, this, ""));
    out->name_ = auto_name(std::string(prefix) + n->name(), out);
  }
  return insert(std::move(e));
}

inline void Graph::replace_all_uses(Node* from, Node* to) {
  for (Expr* u : std::vector<Expr*>(from->users_)) {
    for (Node*& in : u->inputs_)
      if (in == from) {
        in = to;
        to->users_.push_back(u);
      }
    u->invalidate_params();
  }
  from->users_.clear();
  outputs_.replace(from, to);
  changed();
}

inline void Graph::rename_unique(Node* n, std::string_view base) {
  ns_.release(n->name_);
  n->name_ = auto_name(base, n);
  changed();
}

inline void Graph::compile() {
  // Only a graph that changes is re-planned: ResNet-18's stage graphs stay planned when their blocks
  // are compiled.
  bool edited = false;
  // Getattr chains and duplicates: `getattr(getattr(self, "a"), "b")` becomes `getattr(self, "a.b")`.
  std::unordered_map<std::string, Node*> first;  // "<base id>/<path>" of the first getattr
  for (const auto& up : exprs_) {
    Expr& e = *up;
    if (e.kind_ != ExprKind::get_attr) continue;
    Node* base = e.inputs_.front();
    const Expr* producer = base->expr_;
    if (producer != nullptr && producer->kind_ == ExprKind::get_attr) {
      Node* root = producer->inputs_.front();
      e.target_ = producer->target_ + "." + e.target_;
      auto& users = base->users_;
      users.erase(std::find(users.begin(), users.end(), &e));
      e.inputs_.front() = root;
      root->users_.push_back(&e);
      edited = true;
    }
    const std::string key = std::to_string(reinterpret_cast<std::uintptr_t>(e.inputs_.front())) + "/" + e.target_;
    const auto [it, fresh] = first.emplace(key, e.output());
    if (!fresh) {
      replace_all_uses(e.output(), it->second);
      edited = true;
    }
  }
  // Dead exprs: everything the outputs do not depend on, found walking back from them.
  std::unordered_set<const Expr*> live;
  const std::vector<Node*> outs = outputs();
  std::vector<const Node*> work(outs.begin(), outs.end());
  while (!work.empty()) {
    const Node* n = work.back();
    work.pop_back();
    const Expr* p = n->expr_;
    if (p == nullptr || p->kind_ == ExprKind::input || !live.insert(p).second) continue;
    for (const Node* in : p->inputs_) work.push_back(in);
  }
  for (auto it = exprs_.end(); it != exprs_.begin();) {
    --it;
    if (live.count(it->get()) != 0) continue;
    Expr* dead = it->get();
    for (Node* in : dead->inputs_) {
      auto& u = in->users_;
      u.erase(std::find(u.begin(), u.end(), dead));
    }
    for (const auto& out : dead->outputs_) ns_.release(out->name_);
    if (insert_point_ && *insert_point_ == it) insert_point_ = std::next(it);
    it = exprs_.erase(it);
    edited = true;
  }
  if (edited) changed();
}

inline void Graph::set_name(const std::string& name) {
  if (NameSpace::sanitize(name) != name || NameSpace::is_reserved(name))
    throw graph_error("Graph.set_name: '" + name + "' is not a valid graph name (an identifier that is no C++ keyword)");
  if (name == name_) return;
  if (parent_ != nullptr) {
    if (parent_->ns_.taken(name))
      throw graph_error("Graph.set_name: the name '" + name + "' is already used in " + parent_->name_ + ".Graph");
    parent_->ns_.release(name_);
    parent_->ns_.claim(name, this);
    name_ = name;
    return;
  }
  const std::string old = qualname_;
  const auto requalify = [&](std::string& q) {
    if (q == old || (q.size() > old.size() && q.compare(0, old.size(), old) == 0 && q[old.size()] == '.'))
      q = name + q.substr(old.size());
  };
  for (Graph* g : graphs(true)) {
    requalify(g->qualname_);
    for (Expr* e : g->exprs(false))
      for (Node* n : e->outputs()) requalify(n->qualname_);
  }
  name_ = name;
  changed();
}

inline NodeFilter NodeFilter::name_matches(std::string_view pattern, bool ignorecase) const {
  return where([&](const Node* n) {
    const std::string full = n->top_graph()->name() + "_" + n->name();
    return detail::glob_match(pattern, full, ignorecase) || detail::glob_match(pattern, n->name(), ignorecase);
  });
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

// Running a graph needs the interpreter; every user of Graph gets it, and Graph::to_dot()'s
// definition (dot.hpp, which needs the printer, so the printer includes it at its end).
#include <tracemod/graph/interpreter.hpp>
#include <tracemod/graph/print.hpp>
