// Results of graph queries (MegEngine's ExprFilter / NodeFilter): a list that can be narrowed
// further (chainable) and turned into a list, an id-ordered map, exactly one item, or a count.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/graph/expr.hpp>
#include <tracemod/graph/node.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tracemod::graph {

namespace detail {

/// fnmatch-style glob: `*` any run, `?` one character.
inline bool glob_match(std::string_view pattern, std::string_view text, bool ignorecase) {
  const auto eq = [&](char a, char b) {
    return ignorecase ? std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b))
                      : a == b;
  };
  std::size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || (pattern[p] != '*' && eq(pattern[p], text[t])))) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace detail

template <class T, class Derived>
class BaseFilter {
 public:
  BaseFilter() = default;
  explicit BaseFilter(std::vector<T*> items) : items_(std::move(items)) {}

  /// The items. A temporary filter (`g.nodes().as_list()`) returns them by value, so a range-for
  /// over the list does not read the filter after it is gone.
  [[nodiscard]] const std::vector<T*>& as_list() const& noexcept { return items_; }
  [[nodiscard]] std::vector<T*> as_list() && noexcept { return std::move(items_); }
  /// Items keyed by id, in id order.
  [[nodiscard]] std::map<std::int64_t, T*> as_dict() const {
    std::map<std::int64_t, T*> m;
    for (T* x : items_) m.emplace(x->id(), x);
    return m;
  }
  /// The only item; throws graph_error stating how many there are otherwise.
  [[nodiscard]] T* as_unique() const {
    if (items_.size() != 1)
      throw graph_error(std::string("as_unique: expected exactly one ") + Derived::item_name + ", found " +
                        std::to_string(items_.size()) + describe());
    return items_.front();
  }
  [[nodiscard]] std::size_t as_count() const noexcept { return items_.size(); }
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }

  [[nodiscard]] auto begin() const noexcept { return items_.begin(); }
  [[nodiscard]] auto end() const noexcept { return items_.end(); }

  /// Items whose id is among `ids`.
  [[nodiscard]] Derived with_id(std::initializer_list<std::int64_t> ids) const {
    return with_ids(std::vector<std::int64_t>(ids));
  }
  [[nodiscard]] Derived with_ids(const std::vector<std::int64_t>& ids) const {
    return where([&](const T* x) { return std::find(ids.begin(), ids.end(), x->id()) != ids.end(); });
  }
  /// Items satisfying `pred`.
  template <class Pred>
  [[nodiscard]] Derived where(Pred&& pred) const {
    std::vector<T*> v;
    for (T* x : items_)
      if (pred(static_cast<const T*>(x))) v.push_back(x);
    return Derived(std::move(v));
  }

 private:
  [[nodiscard]] std::string describe() const {
    if (items_.empty()) return "";
    std::string s = " (ids";
    for (std::size_t i = 0; i < items_.size() && i < 8; ++i) {
      s += ' ';  // appended piecewise: g++ 12 misreports -Wrestrict on "literal" + std::string&&
      s += std::to_string(items_[i]->id());
    }
    return s + (items_.size() > 8 ? " ...)" : ")");
  }

  std::vector<T*> items_;
};

class ExprFilter : public BaseFilter<Expr, ExprFilter> {
 public:
  static constexpr const char* item_name = "expr";
  using BaseFilter::BaseFilter;

  /// CallFunction exprs of an op: `call_function(F::relu)`, or by printed target ("nn.relu").
  template <functional::op_definition Op>
  [[nodiscard]] ExprFilter call_function(const Op&) const {
    return call_function(std::string_view(Op::target));
  }
  [[nodiscard]] ExprFilter call_function(std::string_view target) const {
    return where([&](const Expr* e) { return e->kind() == ExprKind::call_function && e->target() == target; });
  }
  /// CallMethod exprs of a method ("__add__"); "__call__" selects module calls.
  [[nodiscard]] ExprFilter call_method(std::string_view method) const {
    return where([&](const Expr* e) { return e->kind() == ExprKind::call_method && e->target() == method; });
  }
  [[nodiscard]] ExprFilter of_kind(ExprKind k) const {
    return where([&](const Expr* e) { return e->kind() == k; });
  }
};

class NodeFilter : public BaseFilter<Node, NodeFilter> {
 public:
  static constexpr const char* item_name = "node";
  using BaseFilter::BaseFilter;

  /// ModuleNodes whose module is an M (dynamic type, like isinstance).
  template <class M>
  [[nodiscard]] NodeFilter module_type() const {
    return where([](const Node* n) {
      if (n->kind() != Node::Kind::module) return false;
      const Module* m = static_cast<const ModuleNode*>(n)->owner();
      return m != nullptr && dynamic_cast<const M*>(m) != nullptr;
    });
  }
  /// Nodes whose "<graph name>_<node name>" or own name matches a glob (`*`, `?`).
  [[nodiscard]] NodeFilter name_matches(std::string_view pattern, bool ignorecase = true) const;
};

}  // namespace tracemod::graph
