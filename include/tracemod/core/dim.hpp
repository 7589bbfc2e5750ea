// DimExpr: a symbolic tensor extent, and Dims, one per axis: what a graph traced with dynamic
// dimensions records beside each tensor's example shape. An expression is a constant, a named
// symbol ("batch", "H") or +, -, * and floor / ceiling division of expressions. Building one
// simplifies it (constants fold, x+0, x*1, x/1, (x*k)/k, (x/a)/b = x/(a*b), (x+a)+b = x+(a+b)),
// so shapes derived through a network stay readable: a 3x3 stride-2 convolution of H gives
// (H-1)/2+1. Equality is structural after simplification. Extents are non-negative, so `/` is
// floor division.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/shape.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tracemod {

class DimExpr {
 public:
  enum class Kind : std::uint8_t { constant, symbol, add, sub, mul, floordiv, ceildiv };

  DimExpr() = default;
  DimExpr(std::int64_t value) : value_(value) {}  // NOLINT: a number is a constant extent
  /// A named symbol; throws value_error for an empty name.
  static DimExpr symbol(std::string name);

  [[nodiscard]] Kind kind() const noexcept;
  [[nodiscard]] bool is_constant() const noexcept { return !node_; }
  [[nodiscard]] bool is_symbol() const noexcept { return kind() == Kind::symbol; }
  /// The value of a constant (0 for any other expression).
  [[nodiscard]] std::int64_t value() const noexcept { return node_ ? 0 : value_; }
  /// The name of a symbol (empty for any other expression).
  [[nodiscard]] const std::string& name() const noexcept;
  /// The operands of a binary expression.
  [[nodiscard]] const DimExpr& lhs() const;
  [[nodiscard]] const DimExpr& rhs() const;

  friend bool operator==(const DimExpr& a, const DimExpr& b);

  friend DimExpr operator+(const DimExpr& a, const DimExpr& b);
  friend DimExpr operator-(const DimExpr& a, const DimExpr& b);
  friend DimExpr operator*(const DimExpr& a, const DimExpr& b);
  /// Floor division (extents are non-negative).
  friend DimExpr operator/(const DimExpr& a, const DimExpr& b);
  friend DimExpr ceil_div(const DimExpr& a, const DimExpr& b);

  /// The value under `binding` (symbol name -> extent); throws shape_error naming an unbound symbol
  /// or a division by zero.
  [[nodiscard]] std::int64_t evaluate(const std::map<std::string, std::int64_t, std::less<>>& binding) const;

  /// Appends the names of the symbols the expression uses (each once).
  void symbols(std::vector<std::string>& out) const;

  /// Symbols by name, operators with the fewest parentheses C's precedence needs: "(H-1)/2+1",
  /// "N*64", "ceildiv(H, 2)".
  [[nodiscard]] std::string to_string() const;

 private:
  struct node;

  static std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    const std::int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  }
  [[nodiscard]] int precedence() const noexcept {
    switch (kind()) {
      case Kind::add:
      case Kind::sub: return 1;
      case Kind::mul:
      case Kind::floordiv: return 2;
      default: return 3;  // atoms, ceildiv(...)
    }
  }
  static DimExpr make(Kind k, DimExpr a, DimExpr b);
  /// a / k when k divides every term of a exactly (a product by a multiple of k, a sum of such
  /// terms, a constant multiple of k), else nothing.
  static std::optional<DimExpr> exact_div(const DimExpr& a, std::int64_t k) {
    if (a.is_constant()) {
      if (a.value_ % k == 0) return DimExpr(a.value_ / k);
      return std::nullopt;
    }
    switch (a.kind()) {
      case Kind::mul:
        if (auto l = exact_div(a.lhs(), k)) return *l * a.rhs();
        if (auto r = exact_div(a.rhs(), k)) return a.lhs() * *r;
        return std::nullopt;
      case Kind::add:
      case Kind::sub: {
        auto l = exact_div(a.lhs(), k);
        auto r = exact_div(a.rhs(), k);
        if (!l || !r) return std::nullopt;
        return a.kind() == Kind::add ? *l + *r : *l - *r;
      }
      default: return std::nullopt;
    }
  }

  std::shared_ptr<const node> node_;  // null: a constant
  std::int64_t value_ = 0;
};

struct DimExpr::node {
  Kind kind;
  std::string name;
  DimExpr lhs, rhs;
};

inline DimExpr DimExpr::symbol(std::string name) {
  if (name.empty()) throw value_error("DimExpr::symbol: a symbol needs a name");
  DimExpr e;
  e.node_ = std::make_shared<const node>(node{Kind::symbol, std::move(name), {}, {}});
  return e;
}
inline DimExpr::Kind DimExpr::kind() const noexcept { return node_ ? node_->kind : Kind::constant; }
inline const std::string& DimExpr::name() const noexcept {
  static const std::string none;
  return is_symbol() ? node_->name : none;
}
inline const DimExpr& DimExpr::lhs() const { return node_->lhs; }
inline const DimExpr& DimExpr::rhs() const { return node_->rhs; }
inline DimExpr DimExpr::make(Kind k, DimExpr a, DimExpr b) {
  DimExpr e;
  e.node_ = std::make_shared<const node>(node{k, {}, std::move(a), std::move(b)});
  return e;
}

inline bool operator==(const DimExpr& a, const DimExpr& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_constant()) return a.value_ == b.value_;
  if (a.node_ == b.node_) return true;
  if (a.is_symbol()) return a.node_->name == b.node_->name;
  return a.node_->lhs == b.node_->lhs && a.node_->rhs == b.node_->rhs;
}

inline std::int64_t DimExpr::evaluate(const std::map<std::string, std::int64_t, std::less<>>& binding) const {
    switch (kind()) {
      case Kind::constant: return value_;
      case Kind::symbol: {
        const auto it = binding.find(node_->name);
        if (it == binding.end()) throw shape_error("DimExpr: symbol '" + node_->name + "' has no value");
        return it->second;
      }
      default: break;
    }
    const std::int64_t a = node_->lhs.evaluate(binding), b = node_->rhs.evaluate(binding);
    switch (kind()) {
      case Kind::add: return a + b;
      case Kind::sub: return a - b;
      case Kind::mul: return a * b;
      default: break;
    }
    if (b == 0) throw shape_error("DimExpr: " + to_string() + " divides by zero");
    return kind() == Kind::floordiv ? floor_div(a, b) : -floor_div(-a, b);
  }

inline void DimExpr::symbols(std::vector<std::string>& out) const {
    if (is_symbol()) {
      for (const std::string& s : out)
        if (s == node_->name) return;
      out.push_back(node_->name);
    } else if (node_ && !is_symbol()) {
      node_->lhs.symbols(out);
      node_->rhs.symbols(out);
    }
  }

inline std::string DimExpr::to_string() const {
    switch (kind()) {
      case Kind::constant: return std::to_string(value_);
      case Kind::symbol: return node_->name;
      case Kind::ceildiv: return "ceildiv(" + node_->lhs.to_string() + ", " + node_->rhs.to_string() + ")";
      default: break;
    }
    const int p = precedence();
    const DimExpr& l = node_->lhs;
    const DimExpr& r = node_->rhs;
    std::string ls = l.to_string(), rs = r.to_string();
    if (l.precedence() < p) ls = "(" + ls + ")";
    // Left-associative: a right operand of equal precedence needs parentheses unless the operator
    // is associative with it (a+b+c, a*b*c).
    const bool assoc = (kind() == Kind::add && r.kind() == Kind::add) || (kind() == Kind::mul && r.kind() == Kind::mul);
    if (r.precedence() < p || (r.precedence() == p && !assoc)) rs = "(" + rs + ")";
    // x + c with a negative constant prints as x - |c|.
    if (kind() == Kind::add && r.is_constant() && r.value_ < 0) return ls + "-" + std::to_string(-r.value_);
    const char* op = kind() == Kind::add ? "+" : kind() == Kind::sub ? "-" : kind() == Kind::mul ? "*" : "/";
    return ls + op + rs;
  }

inline DimExpr operator+(const DimExpr& a, const DimExpr& b) {
  using K = DimExpr::Kind;
  if (a.is_constant() && b.is_constant()) return a.value_ + b.value_;
  if (a.is_constant()) return b + a;  // constants go right: x + c
  if (b.is_constant() && b.value_ == 0) return a;
  if (b.is_constant() && a.kind() == K::add && a.rhs().is_constant()) return a.lhs() + (a.rhs().value_ + b.value_);
  return DimExpr::make(K::add, a, b);
}

inline DimExpr operator-(const DimExpr& a, const DimExpr& b) {
  if (b.is_constant()) return a + DimExpr(-b.value_);
  if (a == b) return 0;
  // (x + c) - y = (x - y) + c keeps constants outermost, where they fold.
  if (a.kind() == DimExpr::Kind::add && a.rhs().is_constant()) return (a.lhs() - b) + a.rhs();
  return DimExpr::make(DimExpr::Kind::sub, a, b);
}

inline DimExpr operator*(const DimExpr& a, const DimExpr& b) {
  using K = DimExpr::Kind;
  if (a.is_constant() && b.is_constant()) return a.value_ * b.value_;
  if (a.is_constant()) return b * a;  // constants go right: x * c
  if (b.is_constant() && b.value_ == 0) return 0;
  if (b.is_constant() && b.value_ == 1) return a;
  if (b.is_constant() && a.kind() == K::mul && a.rhs().is_constant()) return a.lhs() * (a.rhs().value_ * b.value_);
  return DimExpr::make(K::mul, a, b);
}

inline DimExpr operator/(const DimExpr& a, const DimExpr& b) {
  using K = DimExpr::Kind;
  if (b.is_constant() && b.value_ == 0) throw shape_error("DimExpr: " + a.to_string() + " divided by zero");
  if (a.is_constant() && b.is_constant()) return DimExpr::floor_div(a.value_, b.value_);
  if (a == b) return 1;
  if (!b.is_constant()) return DimExpr::make(K::floordiv, a, b);
  const std::int64_t k = b.value_;
  if (k == 1) return a;
  if (auto q = DimExpr::exact_div(a, k)) return *q;
  // floor(floor(x/p)/q) = floor(x/(p*q)) for positive p, q.
  if (a.kind() == K::floordiv && a.rhs().is_constant() && a.rhs().value_ > 0 && k > 0) return a.lhs() / (a.rhs().value_ * k);
  // (x + c*k) / k = x/k + c.
  if (a.kind() == K::add && a.rhs().is_constant() && a.rhs().value_ % k == 0) return a.lhs() / b + a.rhs().value_ / k;
  return DimExpr::make(K::floordiv, a, b);
}

inline DimExpr ceil_div(const DimExpr& a, const DimExpr& b) {
  if (b.is_constant() && b.value_ == 0) throw shape_error("DimExpr: " + a.to_string() + " divided by zero");
  if (a.is_constant() && b.is_constant()) return -DimExpr::floor_div(-a.value_, b.value_);
  if (b.is_constant() && b.value_ == 1) return a;
  if (b.is_constant())
    if (auto q = DimExpr::exact_div(a, b.value_)) return *q;
  return DimExpr::make(DimExpr::Kind::ceildiv, a, b);
}

/// A symbolic shape: one expression per axis.
using Dims = std::vector<DimExpr>;

/// Symbol name -> extent.
using DimBinding = std::map<std::string, std::int64_t, std::less<>>;

/// The constant dims of a static shape.
[[nodiscard]] inline Dims to_dims(const Shape& s) { return Dims(s.begin(), s.end()); }

/// The value of a small int32 tensor computed from shapes while a graph is recorded (F::shape_of,
/// and what getitem, stack and tensor_from_list build from it): one expression per element (one for
/// a rank-0 tensor) over the graph's symbols, and its value at the example extents.
struct ShapeValue {
  Dims dims;
  std::vector<std::int64_t> example;
  friend bool operator==(const ShapeValue&, const ShapeValue&) = default;
};

/// A tensor as symbolic shape inference sees it: its dims and the example shape it was traced with
/// (ops read example extents where a rule depends on them, such as broadcasting), and its value
/// when it is a ShapeValue (null otherwise).
struct ShapeDims {
  Dims dims;
  Shape shape;
  const ShapeValue* value = nullptr;
};

/// The output extent of a sliding window (convolution, pooling) over `in`:
/// (in + 2*pad - dilation*(kernel-1) - 1) / stride + 1.
[[nodiscard]] inline DimExpr window_extent(const DimExpr& in, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                                           std::int64_t dilation) {
  return (in + (2 * pad - dilation * (kernel - 1) - 1)) / stride + 1;
}

/// Whether every axis is a constant.
[[nodiscard]] inline bool is_static(const Dims& d) {
  for (const DimExpr& e : d)
    if (!e.is_constant()) return false;
  return true;
}

/// "(batch, 64, (H-1)/2+1, W/2)"; a rank-1 shape prints as "(N,)" like Shape.
[[nodiscard]] inline std::string to_string(const Dims& d) {
  std::string s = "(";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + d[i].to_string();
  return s + (d.size() == 1 ? ",)" : ")");
}

/// The extents under `binding` (throws shape_error for an unbound symbol).
[[nodiscard]] inline Shape evaluate(const Dims& d, const DimBinding& binding) {
  Shape s;
  for (const DimExpr& e : d) s.push_back(e.evaluate(binding));
  return s;
}

/// The product of the extents (1 for rank 0).
[[nodiscard]] inline DimExpr numel(const Dims& d) {
  DimExpr n = 1;
  for (const DimExpr& e : d) n = n * e;
  return n;
}

/// Broadcasting of two symbolic shapes, right-aligned, given the example shapes they were traced
/// with. Per axis: equal expressions stay; a constant 1 gives the other side; a constant extent
/// against a symbolic one gives the constant (the run checks the symbol's extent); two different
/// symbolic extents give the one whose example extent is not 1 (the left one if neither is), and
/// the run checks them. Example shapes that do not broadcast throw shape_error naming `op`.
[[nodiscard]] inline Dims broadcast_dims(const Dims& a, const Shape& ea, const Dims& b, const Shape& eb,
                                         std::string_view op) {
  (void)broadcast_shapes(ea, eb, op);
  const std::size_t r = std::max(a.size(), b.size());
  Dims out;
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t ia = i + a.size(), ib = i + b.size();
    if (ia < r) {
      out.push_back(b[ib - r]);
      continue;
    }
    if (ib < r) {
      out.push_back(a[ia - r]);
      continue;
    }
    const DimExpr& da = a[ia - r];
    const DimExpr& db = b[ib - r];
    if (da == db || (db.is_constant() && db.value() == 1)) {
      out.push_back(da);
    } else if (da.is_constant() && da.value() == 1) {
      out.push_back(db);
    } else if (da.is_constant() || db.is_constant()) {
      out.push_back(da.is_constant() ? da : db);
    } else {
      out.push_back(ea[ia - r] == 1 ? db : da);
    }
  }
  return out;
}

}  // namespace tracemod
