// Helpers shared by the pass tests: a readable summary of a graph's exprs, and the comparison of an
// optimized module with its original (outputs within 1e-4 relative, checked graph).
#pragma once

#include <tracemod/tracemod.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace passes_test {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
namespace G = tracemod::graph;

/// One word per expr of `g` (not recursive): the op target, "call:<module type>" for module calls,
/// "const" and "getattr:<path>".
inline std::vector<std::string> ops(const G::Graph& g) {
  std::vector<std::string> v;
  for (const G::Expr* e : g.exprs(false)) {
    switch (e->kind()) {
      case G::ExprKind::input: break;
      case G::ExprKind::constant: v.push_back("const"); break;
      case G::ExprKind::get_attr: v.push_back("getattr:" + e->name()); break;
      default:
        v.push_back(e->is_module_call() ? "call:" + static_cast<const G::ModuleNode*>(e->inputs().front())->module_type()
                                        : e->target());
    }
  }
  return v;
}

/// The words joined by spaces (readable when a check fails).
inline std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& w : v) s += (s.empty() ? "" : " ") + w;
  return s;
}

/// The calls only (no constants, no getattrs).
inline std::vector<std::string> calls(const G::Graph& g) {
  std::vector<std::string> v;
  for (const std::string& s : ops(g))
    if (s != "const" && s.rfind("getattr:", 0) != 0) v.push_back(s);
  return v;
}

/// How many calls with this word the whole hierarchy holds.
inline std::size_t count(const G::Graph& g, const std::string& word) {
  std::size_t n = 0;
  for (const G::Graph* sub : g.graphs(true)) {
    const auto v = ops(*sub);
    n += static_cast<std::size_t>(std::count(v.begin(), v.end(), word));
  }
  return n;
}

/// max |a - b| / max(1, max |b|).
inline double rel_diff(const tmod::Tensor& a, const tmod::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double diff = 0.0, scale = 1.0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.data<float>()[i])));
  }
  return diff / scale;
}

/// The text of a module's graphs (top and sub-graphs), to show that a module did not change.
inline std::string text(const tmod::TracedModule& m) {
  std::string s;
  for (const G::Graph* g : m.graph().graphs(true)) {
    std::ostringstream os;
    os << *g;
    s += os.str();
  }
  return s;
}

/// Every tensor of the module, copied, with its path.
inline std::vector<std::pair<std::string, tmod::Tensor>> weights(const tmod::Module& m) {
  std::vector<std::pair<std::string, tmod::Tensor>> v;
  for (const auto& [name, t] : m.named_tensors()) v.emplace_back(name, t.clone());
  return v;
}

inline bool same_weights(const std::vector<std::pair<std::string, tmod::Tensor>>& a,
                         const std::vector<std::pair<std::string, tmod::Tensor>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const tmod::Tensor& x = a[i].second;
    const tmod::Tensor& y = b[i].second;
    if (a[i].first != b[i].first || x.dtype() != y.dtype() || x.shape() != y.shape()) return false;
    if (x.dtype() == tmod::DType::float32 && !std::equal(x.data<float>(), x.data<float>() + x.numel(), y.data<float>()))
      return false;
    if (x.dtype() == tmod::DType::int32 &&
        !std::equal(x.data<std::int32_t>(), x.data<std::int32_t>() + x.numel(), y.data<std::int32_t>()))
      return false;
  }
  return true;
}

/// The largest rel_diff over the tensors of two nested values of the same structure.
inline double value_diff(const tmod::Value& a, const tmod::Value& b) {
  if (a.is_tensor()) return rel_diff(a.tensor(), b.tensor());
  double d = 0.0;
  REQUIRE(a.items().size() == b.items().size());
  for (std::size_t i = 0; i < a.items().size(); ++i) d = std::max(d, value_diff(a.items()[i], b.items()[i]));
  return d;
}

/// The exprs of the module's graphs that nothing uses: no output has a user or is a graph output.
inline std::vector<std::string> unused_exprs(const tmod::TracedModule& m) {
  std::vector<std::string> v;
  for (const G::Graph* g : m.graph().graphs(true)) {
    const std::vector<G::Node*> outs = g->outputs();
    for (const G::Expr* e : g->exprs(false)) {
      if (e->kind() == G::ExprKind::input) continue;
      bool used = false;
      for (const G::Node* n : e->outputs())
        used = used || !n->users().empty() || std::find(outs.begin(), outs.end(), n) != outs.end();
      if (!used) v.push_back(g->name() + ": %" + std::to_string(e->id()));
    }
  }
  return v;
}

/// optimize(m, passes) must leave m as it was (graphs and weights), pass tmod::check, leave no
/// unused expr and compute what m computes within 1e-4 relative.
template <class... T>
tmod::TracedModule optimized_matches(tmod::TracedModule& m, const std::vector<std::string>& passes, const T&... x) {
  const std::string before = text(m);
  const auto before_weights = weights(m);
  const tmod::Value expected = m(x...);
  tmod::TracedModule opt = tmod::optimize(m, passes);
  CHECK(text(m) == before);
  CHECK(same_weights(weights(m), before_weights));
  tmod::check(opt.graph());
  CHECK(join(unused_exprs(opt)) == "");
  CHECK(value_diff(opt(x...), expected) <= 1e-4);
  return opt;
}

}  // namespace passes_test
