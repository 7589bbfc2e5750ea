// BackwardFoldScale (MegEngine's pass, run once; requires FuseConvBn and NormElemWise): moves
// multiplications by a constant number (x * c with c a number or a (1,)/() Constant; -x is x * -1)
// backwards through ops that commute with scaling (their scale_rule, functional/op.hpp and the
// builtin modules: add, reshape, transpose, concat, pooling, relu for positive scales ...) into the
// weight and bias of the convs that produce their inputs; constants those ops add are scaled along:
//   x = conv(x, w, b); x = relu(x); x1 = x + 3; x2 = x + 4; y = (x1 + x2) * 3
//   ->  x = conv(x, w*3, b*3); x = relu(x); x1 = x + 9; x2 = x + 12; y = x1 + x2
//
// Every value gets a factor s (its new value is s times the old one): graph outputs and inputs keep
// s = 1, a removed multiplication by c asks its input for c*s, a scale-transparent op asks its
// inputs for its own s, anything else asks for 1, and a conv absorbs any s. When a value is asked
// for different factors (branches whose scales disagree, a graph output also scaled, a negative
// scale through relu), the consumers that asked for a factor other than 1 are pinned (computed as
// before, their multiplications kept), as is everything after them, and the factors are solved again.
// Scales do not cross module calls: flatten() first to fold across blocks.
#pragma once

#include <tracemod/functional/conv.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/nn/builtin_registry.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/passes/erase_unused.hpp>
#include <tracemod/passes/pass.hpp>
#include <tracemod/passes/rewrite.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tracemod::passes {

namespace detail {

enum class scale_role : std::uint8_t { fixed, mul, conv, linear, positive };

struct scale_info {
  scale_role role = scale_role::fixed;
  double k = 1.0;          // mul: the constant
  std::size_t var = 0;     // mul: the input index of the scaled value
};

/// Constants, getattrs and what only they feed: they are not scaled values themselves.
inline std::unordered_set<const graph::Expr*> constant_exprs(const graph::Graph& g) {
  std::unordered_set<const graph::Expr*> skip;
  for (const auto& up : g.expr_list_()) {
    const graph::Expr* e = up.get();
    if (e->kind() == graph::ExprKind::constant || e->kind() == graph::ExprKind::get_attr) {
      skip.insert(e);
      continue;
    }
    bool all = !e->inputs().empty();
    for (const graph::Node* in : e->inputs()) all = all && skip.count(in->expr()) != 0;
    if (all) skip.insert(e);
  }
  return skip;
}

inline scale_info classify(const graph::Expr& e) {
  using functional::arith_kind;
  using functional::scale_rule;
  const auto from_rule = [](scale_rule r) {
    return scale_info{r == scale_rule::linear     ? scale_role::linear
                      : r == scale_rule::positive ? scale_role::positive
                                                  : scale_role::fixed,
                      1.0, 0};
  };
  if (e.output_count() != 1) return {};
  if (e.is_module_call()) {
    const auto* callee = static_cast<const graph::ModuleNode*>(e.inputs().front());
    if (callee->module_type() == nn::Conv2d::tracemod_type_name) return {scale_role::conv, 1.0, 0};
    const nn::builtin_entry* b = nn::builtin_registry::instance().find(callee->module_type());
    return b != nullptr && e.inputs().size() == 2 ? from_rule(b->scaling) : scale_info{};
  }
  const functional::op_entry* op = e.op();
  if (op == nullptr) return {};
  if (op->target == functional::conv2d_fn::target) {
    const bool constant_params = constant_tensor(e.inputs()[1]) != nullptr &&
                                 (e.inputs().size() == 2 || constant_tensor(e.inputs()[2]) != nullptr);
    return constant_params ? scale_info{scale_role::conv, 1.0, 0} : scale_info{};
  }
  const auto same_shape = [&](const graph::Node* in) {
    return static_cast<const graph::TensorNode*>(in)->shape() == static_cast<const graph::TensorNode*>(e.output())->shape();
  };
  if (op->arith == arith_kind::neg) return same_shape(e.inputs()[0]) ? scale_info{scale_role::mul, -1.0, 0} : scale_info{};
  if (op->arith == arith_kind::mul && op->operands.size() == 2) {
    const std::vector<graph::CallArg> args = e.args();
    for (std::size_t side = 0; side < 2; ++side) {
      const auto c = scalar_of(args[1 - side]);
      const auto* var = std::get_if<graph::Node*>(&args[side]);
      if (!c || var == nullptr || constant_tensor(*var) != nullptr || !std::isfinite(c->value) || c->value == 0.0 ||
          !same_shape(*var))
        continue;
      const auto& inputs = e.inputs();
      const std::size_t index = static_cast<std::size_t>(std::find(inputs.begin(), inputs.end(), *var) - inputs.begin());
      return {scale_role::mul, c->value, index};
    }
    return {};
  }
  return from_rule(op->scaling);
}

class scale_solver {
 public:
  explicit scale_solver(graph::Graph& g) : g_(g), skip_(constant_exprs(g)) {
    for (const auto& up : g.expr_list_())
      if (skip_.count(up.get()) == 0) info_[up.get()] = classify(*up);
    for (const graph::Node* n : g.outputs()) outputs_.insert(n);
    while (!solve()) {
    }
  }

  [[nodiscard]] const scale_info& info(const graph::Expr* e) const { return info_.at(e); }
  [[nodiscard]] bool pinned(const graph::Expr* e) const { return pinned_.count(e) != 0; }
  [[nodiscard]] double sigma(const graph::Expr* e) const {
    const auto it = sigma_.find(e);
    return it == sigma_.end() ? 1.0 : it->second;
  }
  [[nodiscard]] bool active(const graph::Expr* e) const { return skip_.count(e) == 0 && !pinned(e); }

 private:
  /// The factor user `u` asks of its input `i`; nullopt when `u` scales that constant itself.
  std::optional<double> demand(const graph::Expr* u, std::size_t i) const {
    if (!u->inputs()[i]->is_tensor()) return std::nullopt;  // the module a call calls
    if (pinned(u)) return 1.0;
    const scale_info& s = info_.at(u);
    const bool constant = constant_tensor(u->inputs()[i]) != nullptr;
    switch (s.role) {
      case scale_role::fixed: return 1.0;
      case scale_role::conv: return i == (u->is_module_call() ? 1u : 0u) ? std::optional<double>(1.0) : std::nullopt;
      case scale_role::mul: return i == s.var ? std::optional<double>(s.k * sigma(u)) : std::nullopt;
      case scale_role::linear:
      case scale_role::positive: return constant ? std::nullopt : std::optional<double>(sigma(u));
    }
    return 1.0;
  }

  /// One round: the factors from the outputs backwards. On a conflict, pins the consumers that
  /// asked for a factor other than 1 (and what follows them) and returns false.
  bool solve() {
    sigma_.clear();
    const auto& list = g_.expr_list_();
    std::vector<const graph::Expr*> producers;
    for (const graph::Node* in : g_.inputs()) producers.push_back(in->expr());
    for (const auto& up : list) producers.push_back(up.get());
    for (auto it = producers.rbegin(); it != producers.rend(); ++it) {
      const graph::Expr* e = *it;
      for (const graph::Node* out : e->outputs()) {
        std::optional<double> agreed;
        bool conflict = false;
        std::vector<const graph::Expr*> askers;
        if (outputs_.count(out) != 0) agreed = 1.0;
        for (const graph::Expr* u : out->users()) {
          if (skip_.count(u) != 0) continue;
          for (std::size_t i = 0; i < u->inputs().size(); ++i) {
            if (u->inputs()[i] != out) continue;
            const std::optional<double> d = demand(u, i);
            if (!d) continue;
            if (*d != 1.0) askers.push_back(u);
            if (agreed && *agreed != *d) conflict = true;
            agreed = agreed.value_or(*d);
          }
        }
        const double s = agreed.value_or(1.0);
        const bool scalable = e->kind() != graph::ExprKind::input && active(e) && e->output_count() == 1;
        if (!conflict && s != 1.0) {
          const scale_role role = scalable ? info_.at(e).role : scale_role::fixed;
          conflict = role == scale_role::fixed || (role == scale_role::positive && !(s > 0));
        }
        if (conflict) {
          if (askers.empty()) throw graph_error("BackwardFoldScale: no consistent scale for '" + out->name() + "'");
          pin_from(askers);
          return false;
        }
        if (scalable) sigma_[e] = s;
      }
    }
    return true;
  }

  void pin_from(std::vector<const graph::Expr*> work) {
    while (!work.empty()) {
      const graph::Expr* e = work.back();
      work.pop_back();
      if (!pinned_.insert(e).second) continue;
      for (const graph::Node* out : e->outputs())
        for (const graph::Expr* u : out->users()) work.push_back(u);
    }
  }

  graph::Graph& g_;
  std::unordered_set<const graph::Expr*> skip_;
  std::unordered_map<const graph::Expr*, scale_info> info_;
  std::unordered_set<const graph::Node*> outputs_;
  std::unordered_set<const graph::Expr*> pinned_;
  std::unordered_map<const graph::Expr*, double> sigma_;
};

/// `t` scaled by s, as a new Constant.
inline graph::Node* scaled_constant(Builder& b, const graph::Node* n, double s) {
  return b.constant(map_tensor(*constant_tensor(n), [s](double x) { return x * s; }), n->name());
}

}  // namespace detail

inline bool backward_fold_scale(graph::Graph& g) {
  const detail::scale_solver solver(g);
  std::vector<graph::Expr*> exprs;
  for (const auto& up : g.expr_list_()) exprs.push_back(up.get());
  std::vector<std::pair<graph::Node*, std::string>> renames;
  std::vector<graph::Expr*> replaced;  // exprs whose output now has no user
  bool changed = false;
  for (graph::Expr* e : exprs) {
    if (!solver.active(e)) continue;
    const detail::scale_info& info = solver.info(e);
    const double s = solver.sigma(e);
    if (info.role == detail::scale_role::mul) {
      g.replace_all_uses(e->output(), e->inputs()[info.var]);
      replaced.push_back(e);
      changed = true;
      continue;
    }
    if (s == 1.0) continue;
    if (info.role == detail::scale_role::conv && e->is_module_call()) {
      nn::Conv2d* conv = private_callee<nn::Conv2d>(g, *e);
      if (conv == nullptr) throw graph_error("BackwardFoldScale: the conv module of %" + std::to_string(e->id()) + " is not at hand");
      conv->weight = Parameter(map_tensor(conv->weight, [s](double x) { return x * s; }));
      if (conv->bias.defined()) conv->bias = Parameter(map_tensor(conv->bias, [s](double x) { return x * s; }));
      g.changed();
      changed = true;
      continue;
    }
    if (info.role == detail::scale_role::fixed) continue;
    const std::vector<graph::CallArg> args = e->args();
    bool has_constants = false;
    for (std::size_t i = 0; i < e->op()->operands.size(); ++i) {
      if (const auto* v = std::get_if<Value>(&args[i])) has_constants = has_constants || v->is_number();
      if (const auto* n = std::get_if<graph::Node*>(&args[i])) has_constants = has_constants || constant_tensor(*n) != nullptr;
      if (const auto* l = std::get_if<std::vector<graph::Node*>>(&args[i]))
        for (const graph::Node* n : *l) has_constants = has_constants || constant_tensor(n) != nullptr;
    }
    if (!has_constants && info.role != detail::scale_role::conv) continue;  // scaled inputs, same call
    // A conv function or a transparent op: the same call with its constants scaled.
    std::vector<graph::CallArg> operands;
    graph::Node* out = nullptr;
    {
      Builder b(g, *e);
      for (std::size_t i = 0; i < e->op()->operands.size(); ++i) {
        graph::CallArg a = args[i];
        if (const auto* n = std::get_if<graph::Node*>(&a); n != nullptr && constant_tensor(*n) != nullptr) {
          graph::Node* scaled = detail::scaled_constant(b, *n, s);
          if ((*n)->users().size() == 1) renames.emplace_back(scaled, (*n)->name());  // the old one dies
          a = scaled;
        }
        else if (const auto* v = std::get_if<Value>(&a); v != nullptr && v->is_number())
          a = Value(v->number() * s);
        else if (const auto* l = std::get_if<std::vector<graph::Node*>>(&a)) {
          std::vector<graph::Node*> items;
          for (graph::Node* n : *l) items.push_back(constant_tensor(n) != nullptr ? detail::scaled_constant(b, n, s) : n);
          a = items;
        }
        operands.push_back(std::move(a));
      }
      out = b.recall(*e, operands);
    }
    renames.emplace_back(out, e->output()->name());
    g.replace_all_uses(e->output(), out);
    replaced.push_back(e);
    changed = true;
  }
  if (!changed) return false;
  erase_unused(g, replaced);
  for (auto& [node, name] : renames)
    if (node->name() != name && !g.names().taken(name)) node->set_name(name);
  return true;
}

inline Pass backward_fold_scale_pass() {
  return {.name = "BackwardFoldScale",
          .requirements = {"FuseConvBn", "NormElemWise"},
          .run = backward_fold_scale};
}

}  // namespace tracemod::passes
