// The pattern matcher (MegEngine's pattern.py / matcher.py, MLIR's RewritePattern): patterns are
// small trees built with is_op<M::Conv2d>(), is_op(F::relu), is_op("__add__"), is_const(), is_var(),
// any_node(), the call form `p(args...)`, the operators + - * / (tensor methods __add__ ...) and
// alternatives `|`, refined with predicates. A Pattern is a handle: the same pattern object used
// twice in a tree must match the same expr both times (a variable).
//
//   auto x = is_var();
//   auto conv = is_op<M::Conv2d>();
//   auto p = is_op<M::BatchNorm2d>()(conv) | (x * scalar) * is_const();
//   PatternMatcher m;
//   if (m.match(p, expr)) { graph::Expr* c = m[conv]; ... }
//
// Matching a call: its op must match, and the producers of its tensor inputs (a module call's module
// excluded) match the argument patterns in order; there must be exactly as many inputs as argument
// patterns unless not_all_args(). Numbers passed to a call are not inputs: `x * scalar` is a
// __mul__ with one tensor input. An intermediate result used elsewhere blocks a match: every
// matched expr except the root and the leaves (is_const(), is_var(), any_node()) must have exactly
// one output, used only by the matched exprs that consume it, and not be a graph output
// (check_users(false) lifts the rule for one pattern, check_users(true) imposes it on a leaf).
#pragma once

#include <tracemod/core/value.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/nn/module.hpp>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tracemod::passes {

class Pattern;

namespace detail {

struct pattern_node {
  enum class kind : std::uint8_t { module, op, constant, var, any, call, alternative };
  kind k = kind::any;
  std::string name;              // module: type name; op: printed target
  std::vector<Pattern> args;     // call: op pattern then argument patterns; alternative: both sides
  bool all_args = true;          // call: as many tensor inputs as argument patterns
  bool check_users = true;       // consumers of the output must be exactly the matched ones
  bool check_users_set = false;  // set explicitly (otherwise leaves are not checked)
  std::vector<std::function<bool(const graph::Expr&)>> predicates;
};

}  // namespace detail

/// A handle to a pattern tree node; copies refer to the same node.
class Pattern {
 public:
  explicit Pattern(std::shared_ptr<detail::pattern_node> n) : node_(std::move(n)) {}

  /// A call of this pattern's op with these argument patterns (`is_op(F::conv2d)(x, is_const())`).
  template <class... P>
    requires(std::same_as<P, Pattern> && ...)
  Pattern operator()(const P&... args) const {
    auto n = std::make_shared<detail::pattern_node>();
    n->k = detail::pattern_node::kind::call;
    n->args = {*this, args...};
    return Pattern(std::move(n));
  }

  /// Allows more tensor inputs than argument patterns (the rest match anything).
  Pattern not_all_args() const {
    node_->all_args = false;
    return *this;
  }
  /// Turns MegEngine's single-user rule on or off for this pattern.
  Pattern check_users(bool on = true) const {
    node_->check_users = on;
    node_->check_users_set = true;
    return *this;
  }
  /// Adds a predicate on the matched expr.
  Pattern where(std::function<bool(const graph::Expr&)> pred) const {
    node_->predicates.push_back(std::move(pred));
    return *this;
  }
  /// For is_op<M>(): a predicate on the called module (`.has_attr<M::Conv2d>([](auto& c) { return c.groups == 1; })`).
  template <class M, class F>
  Pattern has_attr(F pred) const {
    return where([pred = std::move(pred)](const graph::Expr& e) {
      if (!e.is_module_call()) return false;
      const auto* m = dynamic_cast<const M*>(static_cast<const graph::ModuleNode*>(e.inputs().front())->owner());
      return m != nullptr && static_cast<bool>(pred(*m));
    });
  }
  /// For op patterns: the named argument (a param such as "groups", or an operand given as a
  /// constant) equals `value` (MegEngine's has_params).
  Pattern has_params(std::string name, Value value) const {
    return where([name = std::move(name), value = std::move(value)](const graph::Expr& e) {
      for (const auto& [k, a] : e.named_args())
        if (k == name) {
          const auto* v = std::get_if<Value>(&a);
          return v != nullptr && *v == value;
        }
      return false;
    });
  }

  [[nodiscard]] const detail::pattern_node& node() const noexcept { return *node_; }
  [[nodiscard]] const detail::pattern_node* id() const noexcept { return node_.get(); }

 private:
  std::shared_ptr<detail::pattern_node> node_;
};

namespace detail {
inline Pattern make_pattern(pattern_node::kind k, std::string name = {}, std::vector<Pattern> args = {}) {
  auto n = std::make_shared<pattern_node>();
  n->k = k;
  n->name = std::move(name);
  n->args = std::move(args);
  return Pattern(std::move(n));
}
}  // namespace detail

/// A call of builtin module type M (`is_op<M::Conv2d>()`).
template <class M>
  requires requires { M::tracemod_type_name; }
Pattern is_op() {
  return detail::make_pattern(detail::pattern_node::kind::module, std::string(M::tracemod_type_name));
}
/// A call of a functional op or tensor method (`is_op(F::relu)`, `is_op(F::method_add)`).
template <functional::op_definition Op>
Pattern is_op(const Op&) {
  return detail::make_pattern(detail::pattern_node::kind::op, std::string(Op::target));
}
/// A call of an op by printed target: a tensor method "__add__" or a function "nn.relu".
inline Pattern is_op(std::string_view target) {
  return detail::make_pattern(detail::pattern_node::kind::op, std::string(target));
}
/// A Constant expr.
inline Pattern is_const() { return detail::make_pattern(detail::pattern_node::kind::constant); }
/// Anything that is not a Constant expr (a graph input, a getattr before AttrToConstant, a call).
inline Pattern is_var() { return detail::make_pattern(detail::pattern_node::kind::var); }
/// Anything.
inline Pattern any_node() { return detail::make_pattern(detail::pattern_node::kind::any); }

/// Alternatives: the left one first.
inline Pattern operator|(const Pattern& a, const Pattern& b) {
  return detail::make_pattern(detail::pattern_node::kind::alternative, {}, {a, b});
}

/// Marks a number operand of an arithmetic pattern: `x * scalar` is `x.__mul__(<number>)`.
struct scalar_t {};
inline constexpr scalar_t scalar{};

#define TRACEMOD_DETAIL_PATTERN_OPERATOR(sym, method)                                                 \
  inline Pattern operator sym(const Pattern& a, const Pattern& b) { return is_op(method)(a, b); }  \
  inline Pattern operator sym(const Pattern& a, scalar_t) { return is_op(method)(a); }
TRACEMOD_DETAIL_PATTERN_OPERATOR(+, "__add__")
TRACEMOD_DETAIL_PATTERN_OPERATOR(-, "__sub__")
TRACEMOD_DETAIL_PATTERN_OPERATOR(*, "__mul__")
TRACEMOD_DETAIL_PATTERN_OPERATOR(/, "__truediv__")
#undef TRACEMOD_DETAIL_PATTERN_OPERATOR

/// Matches patterns against exprs and remembers what each pattern matched.
class PatternMatcher {
 public:
  /// Whether `p` matches at `root` (the root's users are not checked).
  bool match(const Pattern& p, graph::Expr& root) {
    bound_.clear();
    consumers_.clear();
    if (!visit(p, root, nullptr)) return false;
    std::vector<const graph::Expr*> checked_exprs;
    for (const auto& [pat, e] : bound_)
      if (e != &root && checked(*pat)) checked_exprs.push_back(e);
    for (const graph::Expr* e : checked_exprs) {
      if (e->output_count() != 1) return false;
      const graph::Node* out = e->output();
      for (const graph::Node* o : e->top_graph()->outputs())
        if (o == out) return false;
      std::vector<const graph::Expr*> users(out->users().begin(), out->users().end());
      std::vector<const graph::Expr*> expected = consumers_[e];
      std::sort(users.begin(), users.end());
      std::sort(expected.begin(), expected.end());
      if (users != expected) return false;
    }
    return true;
  }
  /// The expr pattern `p` matched in the last successful match (null if it took part in none).
  graph::Expr* operator[](const Pattern& p) const {
    const auto it = bound_.find(p.id());
    return it == bound_.end() ? nullptr : it->second;
  }

 private:
  using node = detail::pattern_node;

  static bool checked(const node& n) {
    if (n.check_users_set) return n.check_users;
    // Leaves are the boundary of a match, not intermediates; an alternative is checked through the
    // side that matched.
    return n.k != node::kind::constant && n.k != node::kind::var && n.k != node::kind::any &&
           n.k != node::kind::alternative;
  }

  bool visit(const Pattern& p, graph::Expr& e, const graph::Expr* consumer) {
    const node& n = p.node();
    if (const auto it = bound_.find(&n); it != bound_.end()) {
      if (it->second != &e) return false;
      if (consumer != nullptr) consumers_[&e].push_back(consumer);
      return true;
    }
    if (!visit_kind(n, e)) return false;
    for (const auto& pred : n.predicates)
      if (!pred(e)) return false;
    bound_.emplace(&n, &e);
    if (consumer != nullptr) consumers_[&e].push_back(consumer);
    return true;
  }

  bool visit_kind(const node& n, graph::Expr& e) {
    switch (n.k) {
      case node::kind::any: return true;
      case node::kind::constant: return e.kind() == graph::ExprKind::constant;
      case node::kind::var: return e.kind() != graph::ExprKind::constant;
      case node::kind::module:
        return e.is_module_call() && static_cast<const graph::ModuleNode*>(e.inputs().front())->module_type() == n.name;
      case node::kind::op: return e.op() != nullptr && e.op()->target == n.name;
      case node::kind::call: {
        if (!e.is_call() || !visit_kind(n.args.front().node(), e)) return false;
        for (const auto& pred : n.args.front().node().predicates)
          if (!pred(e)) return false;
        const std::size_t skip = e.is_module_call() ? 1 : 0;
        const std::size_t inputs = e.inputs().size() - skip;
        const std::size_t patterns = n.args.size() - 1;
        if (n.all_args ? inputs != patterns : inputs < patterns) return false;
        for (std::size_t i = 0; i < patterns; ++i)
          if (!visit(n.args[i + 1], *e.inputs()[i + skip]->expr(), &e)) return false;
        return true;
      }
      case node::kind::alternative: {
        const auto saved_bound = bound_;
        const auto saved_consumers = consumers_;
        if (visit(n.args[0], e, nullptr)) return true;
        bound_ = saved_bound;
        consumers_ = saved_consumers;
        return visit(n.args[1], e, nullptr);
      }
    }
    return false;
  }

  std::unordered_map<const node*, graph::Expr*> bound_;
  std::unordered_map<const graph::Expr*, std::vector<const graph::Expr*>> consumers_;
};

}  // namespace tracemod::passes
