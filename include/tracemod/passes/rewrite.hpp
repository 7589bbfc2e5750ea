// The small surgery toolkit passes rewrite with: facts about constant operands, a builder that
// records new exprs right before an expr with fresh ids, replacement that keeps the replaced node's
// name and deletes only what it left unused (erase_unused.hpp), and the backward worklist
// MegEngine's passes visit a graph with.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/nn/module.hpp>
#include <tracemod/passes/erase_unused.hpp>
#include <tracemod/traced_module/surgery.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tracemod::passes {

/// The tensor of a node produced by a Constant expr, or null.
inline const Tensor* constant_tensor(const graph::Node* n) {
  if (n == nullptr || !n->is_tensor()) return nullptr;
  const graph::Expr* p = n->expr();
  if (p == nullptr || p->kind() != graph::ExprKind::constant || p->const_module() != nullptr) return nullptr;
  return &p->const_tensor();
}

/// A constant that may scale or shift a whole tensor: a number, or a float32 tensor of shape (1,)
/// or () (MegEngine's passes accept no other).
struct scalar_constant {
  double value = 0.0;
  std::optional<Shape> shape;  ///< set for a tensor constant: (1,) or ()
};

/// The value of a call argument as a scalar constant: a number, or a Constant node of one element.
inline std::optional<scalar_constant> scalar_of(const graph::CallArg& a) {
  if (const auto* v = std::get_if<Value>(&a)) {
    if (!v->is_number()) return std::nullopt;
    return scalar_constant{v->number(), std::nullopt};
  }
  if (const auto* n = std::get_if<graph::Node*>(&a)) {
    const Tensor* t = constant_tensor(*n);
    if (t == nullptr || t->dtype() != DType::float32 || t->numel() != 1 || t->shape().rank() > 1) return std::nullopt;
    return scalar_constant{static_cast<double>(t->data<float>()[0]), t->shape()};
  }
  return std::nullopt;
}

/// A float32 tensor of `shape` holding f(x) for every element x of `t` (a new buffer: passes never
/// write into a tensor the input module still holds).
inline Tensor map_tensor(const Tensor& t, const std::function<double(double)>& f) {
  Tensor y = Tensor::empty(t.shape(), DType::float32, "passes");
  const float* in = t.data<float>();
  float* out = y.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<float>(f(static_cast<double>(in[i])));
  return y;
}

/// The params of an op call, in the op's canonical order: its named args that are not operands.
inline std::vector<Value> params_of(const graph::Expr& e) {
  std::vector<Value> params;
  for (const auto& named : e.named_args())
    if (std::none_of(e.op()->operands.begin(), e.op()->operands.end(),
                     [&](const functional::operand& o) { return o.name == named.first; }))
      params.push_back(std::get<Value>(named.second));
  return params;
}

/// Records new exprs right before `before`, numbering them after the hierarchy's last ids.
class Builder {
 public:
  Builder(graph::Graph& g, const graph::Expr& before) : g_(g), ids_(graph::IdAllocator::for_hierarchy(g)) {
    g_.set_insert_point(g_.iterator_of(&before));
  }
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;
  ~Builder() {
    g_.reset_insert_point();
    ids_.commit(g_);
  }

  graph::TensorNode* constant(const Tensor& t, std::string_view name = "const_tensor") {
    return static_cast<graph::TensorNode*>(number(g_.create_constant(t, name)->expr())->output());
  }
  /// A call of a registered op: operands as the op takes them, params in canonical order.
  graph::Node* call(const functional::op_entry& op, const std::vector<graph::CallArg>& operands,
                    const std::vector<Value>& params = {}) {
    return number(g_.create_op_call(op, operands, params))->output();
  }
  /// The same call as `e` (an op call) with other operands.
  graph::Node* recall(const graph::Expr& e, const std::vector<graph::CallArg>& operands) {
    return call(*e.op(), operands, params_of(e));
  }
  graph::ModuleNode* get_attr_module(graph::Node* base, std::string path, std::string module_type,
                                     std::string_view name) {
    graph::ModuleNode* n = g_.create_get_attr_module(base, std::move(path), std::move(module_type), name);
    number(n->expr());
    return n;
  }

 private:
  graph::Expr* number(graph::Expr* e) {
    ids_.number(*e);
    return e;
  }

  graph::Graph& g_;
  graph::IdAllocator ids_;
};

/// replace_and_erase when `to` has `from`'s shape (a rewrite never changes a node's shape: its
/// users were recorded with it) and returns `to`'s expr; otherwise deletes the unused new exprs and
/// returns null.
inline graph::Expr* replace_if_same_shape(graph::Graph& g, graph::Node* from, graph::Node* to) {
  if (static_cast<const graph::TensorNode*>(to)->shape() != static_cast<const graph::TensorNode*>(from)->shape()) {
    erase_unused(g, {to->expr()});
    return nullptr;
  }
  replace_and_erase(g, from, to);
  return to->expr();
}

/// The module `call` calls, private to this call site: the module itself when no other call of the
/// graph calls it, else a copy stored next to it as `<path>_<k>` (MegEngine's naming) and fetched by
/// a new getattr that this call now uses. Returns null when the callee cannot be resolved.
template <class M>
M* private_callee(graph::Graph& g, graph::Expr& call) {
  auto* m = dynamic_cast<M*>(call.callee());
  if (m == nullptr) return nullptr;
  std::size_t calls = 0;
  for (const auto& e : g.expr_list_())
    if (e->is_module_call() && e->callee() == m) ++calls;
  if (calls <= 1) return m;
  auto* node = static_cast<graph::ModuleNode*>(call.inputs().front());
  const graph::Expr* getattr = node->expr();
  if (getattr->kind() != graph::ExprKind::get_attr) return nullptr;
  graph::Node* base_node = getattr->inputs().front();
  Module* base = static_cast<graph::ModuleNode*>(base_node)->owner();
  if (base == nullptr) return nullptr;
  std::string path;
  for (int k = 1;; ++k) {
    path = getattr->name() + "_" + std::to_string(k);
    if (!base->has_attr(path)) break;
  }
  auto copy = std::make_unique<M>(*m);
  M* raw = copy.get();
  base->setattr(path, std::unique_ptr<Module>(std::move(copy)));
  std::string name = path;
  std::replace(name.begin(), name.end(), '.', '_');
  graph::ModuleNode* fresh = nullptr;
  {
    Builder b(g, call);
    fresh = b.get_attr_module(base_node, path, node->module_type(), name);
  }
  call.replace_inputs(node, fresh);
  erase_unused(g, {node->expr()});  // the shared getattr stays while another call uses it
  return raw;
}

/// Whether `e` is still an expr of `g`, asked without touching `e` (it may have been deleted).
inline bool alive(const graph::Graph& g, const graph::Expr* e) { return g.position(e) != graph::Graph::npos; }

/// MegEngine's BackwardPass visit: a worklist seeded with the graph's exprs, last first; an expr the
/// transform replaced (it returns the replacement) is visited again through its replacement, and an
/// expr deleted meanwhile is skipped. Returns whether anything changed.
inline bool rewrite_backward(graph::Graph& g, const std::function<graph::Expr*(graph::Expr&)>& transform) {
  std::vector<graph::Expr*> work;
  for (const auto& e : g.expr_list_()) work.push_back(e.get());
  bool changed = false;
  while (!work.empty()) {
    graph::Expr* e = work.back();
    work.pop_back();
    if (!alive(g, e)) continue;
    if (graph::Expr* replacement = transform(*e)) {
      changed = true;
      if (replacement != e && alive(g, replacement)) work.push_back(replacement);
    }
  }
  return changed;
}

/// The same, first expr first (passes whose rewrites MegEngine documents in call order).
inline bool rewrite_forward(graph::Graph& g, const std::function<graph::Expr*(graph::Expr&)>& transform) {
  std::vector<graph::Expr*> work;
  for (const auto& e : g.expr_list_()) work.push_back(e.get());
  bool changed = false;
  for (graph::Expr* e : work)
    if (alive(g, e) && transform(*e) != nullptr) changed = true;
  return changed;
}

}  // namespace tracemod::passes
