// Building a graph: its inputs, getattrs, constants, op and module calls and outputs, created at
// the insertion point with unique names; copies of exprs and whole graphs.
#pragma once

#include <tracemod/graph/graph.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace tracemod::graph {

namespace detail {

/// Whether a node's dims or value involve a symbol (so the ops it feeds infer symbolic dims).
inline bool has_symbols(const TensorNode& t) {
  return t.is_dynamic() || (t.value() != nullptr && !is_static(t.value()->dims));
}

/// The value of a Constant that holds a ShapeValue: int32, rank 0 or 1, at most Shape::max_rank
/// elements (a shape's length).
inline std::optional<ShapeValue> constant_value(const Tensor& t) {
  if (!t.defined() || t.dtype() != DType::int32 || t.shape().rank() > 1 || t.numel() > static_cast<std::int64_t>(Shape::max_rank))
    return std::nullopt;
  ShapeValue v;
  const std::int32_t* d = t.data<std::int32_t>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    v.dims.push_back(DimExpr(d[i]));
    v.example.push_back(d[i]);
  }
  return v;
}

}  // namespace detail

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
  raw->set_value(detail::constant_value(value));
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

namespace detail {

/// The operands of op call `e` (inputs `inputs`) as symbolic shape inference sees them.
inline std::vector<functional::erased_dims> call_dims(const functional::op_entry& op, const Expr& e,
                                                      const std::vector<Node*>& inputs) {
  const auto dims_of = [&](std::size_t j) { return static_cast<const TensorNode*>(inputs[j])->shape_dims(); };
  std::vector<functional::erased_dims> ops(op.operands.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Expr::Operand b = e.operand(i);
    ops[i].k = b.kind;
    if (b.kind == functional::erased_operand::kind::tensor) ops[i].one = dims_of(b.inputs.front());
    if (b.kind == functional::erased_operand::kind::list)
      for (std::size_t j : b.inputs) ops[i].list.push_back(dims_of(j));
    // An integral number (a pass may write 6 as 6.0) in int32's range.
    if (b.kind == functional::erased_operand::kind::scalar && b.constant->is_number() &&
        b.constant->number() == std::trunc(b.constant->number()) && std::abs(b.constant->number()) <= 2147483647.0) {
      const auto n = static_cast<std::int64_t>(b.constant->number());
      ops[i].number = std::make_shared<const ShapeValue>(ShapeValue{{DimExpr(n)}, {n}});
      ops[i].one.value = ops[i].number.get();
    }
  }
  return ops;
}

/// The symbolic output shape of an op call (its operands' dims `operands`, example output `out`):
/// the op's infer_dims; throws shape_error for an op without one, or for dims that do not have the
/// rank of the example shape.
inline Dims infer_call_dims(const functional::op_entry& op, const void* params,
                            const std::vector<functional::erased_dims>& operands, const Shape& out) {
  if (!op.infer_dims)
    throw shape_error(op.target + " has no symbolic shape inference, so it cannot take a tensor with dynamic dimensions");
  Dims d = op.infer_dims(params, operands);
  if (d.size() != out.rank())
    throw shape_error(op.target + ": symbolic shape " + to_string(d) + " does not have the rank of the output shape " +
                      out.to_string());
  return d;
}

}  // namespace detail

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
    const Expr::Operand b = e->operand(i);
    auto& sh = shapes[i];
    sh.k = b.kind;
    using k = functional::erased_operand::kind;
    if (b.kind == k::tensor) {
      const Node* n = inputs[b.inputs.front()];
      if (!n->is_tensor()) throw graph_error(where() + ": operand '" + std::string(op.operands[i].name) + "' is a module");
      sh.shape = static_cast<const TensorNode*>(n)->shape();
      sh.value = static_cast<const TensorNode*>(n)->value();
      dtypes.push_back(static_cast<const TensorNode*>(n)->dtype());
    } else if (b.kind == k::list) {
      for (std::size_t j : b.inputs) {
        const Node* n = inputs[j];
        if (!n->is_tensor()) throw graph_error(where() + ": a list operand holds a module");
        lists[i].push_back(static_cast<const TensorNode*>(n)->shape());
        dtypes.push_back(static_cast<const TensorNode*>(n)->dtype());
      }
      sh.list = lists[i];
    } else if (b.kind == k::scalar && b.constant->is_tensor()) {
      throw graph_error(where() + ": a tensor operand must be a node (record it as a Constant first)");
    } else if (b.kind == k::scalar && !b.constant->is_number()) {
      throw graph_error(where() + ": operand '" + std::string(op.operands[i].name) + "' cannot be " + b.constant->repr());
    }
  }
  const void* p = e->op_params();
  const Shape out_shape = op.infer_shape(p, shapes);
  const DType out_dtype = op.infer_dtype(p, dtypes);
  const bool symbolic = std::any_of(inputs.begin(), inputs.end(), [](const Node* n) {
    return n->is_tensor() && detail::has_symbols(*static_cast<const TensorNode*>(n));
  });
  std::optional<Dims> out_dims;
  std::optional<ShapeValue> out_value;
  if (symbolic || op.infer_value) {
    const std::vector<functional::erased_dims> operand_dims = detail::call_dims(op, *e, inputs);
    if (symbolic) out_dims = detail::infer_call_dims(op, p, operand_dims, out_shape);
    if (op.infer_value) out_value = op.infer_value(p, operand_dims);
  }
  // Commit: nothing below throws.
  e->inputs_ = inputs;
  for (Node* n : inputs) n->users_.push_back(e.get());
  auto* out = static_cast<TensorNode*>(e->add_output(std::make_unique<TensorNode>(this, "", out_shape, out_dtype)));
  if (out_dims) out->set_dims(*out_dims);
  out->set_value(std::move(out_value));
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

inline std::unique_ptr<Graph> Graph::clone(Module* owner) const {
  auto g = std::make_unique<Graph>(name_, qualname_, owner);
  std::unordered_map<const Node*, Node*> map;
  const auto copy_expr = [&](const Expr& from) {
    std::unique_ptr<Expr> e = copy_call_fields(from, g.get());
    e->id_ = from.id_;
    for (const Node* in : from.inputs_) e->add_input(map.at(in));
    for (const auto& n : from.outputs_) {
      std::unique_ptr<Node> c = copy_node(*n, g.get(), n->name());
      c->id_ = n->id();
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

inline std::unique_ptr<Expr> Graph::copy_call_fields(const Expr& src, Graph* g) {
  std::unique_ptr<Expr> e(new Expr(src.kind_, g));
  e->op_ = src.op_;
  e->target_ = src.target_;
  e->args_ = src.args_;
  e->kwargs_ = src.kwargs_;
  e->signature_ = src.signature_;
  e->const_tensor_ = src.const_tensor_;
  e->const_module_ = src.const_module_;
  e->params_.store(src.params_.load());
  return e;
}

inline std::unique_ptr<Node> Graph::copy_node(const Node& n, Graph* g, std::string name) {
  std::unique_ptr<Node> c;
  if (n.is_tensor()) {
    const auto& t = static_cast<const TensorNode&>(n);
    auto tn = std::make_unique<TensorNode>(g, std::move(name), t.shape(), t.dtype());
    tn->set_qparams(t.qparams());
    tn->copy_symbolic(t);
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

}  // namespace tracemod::graph
