// What load checks beyond the construction API: that each getattr reaches an attribute of the kind,
// type, shape and dtype its node records, that each module call agrees with its callee (a builtin
// module's own shape inference, a traced module's graph for the call's signature), that builtin
// configs hold sane integers. Each returns the reason a loaded part is inconsistent, or an empty
// string. And the numbering of exprs that upgraders insert.
#pragma once

#include <tracemod/core/dtype.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/nn/module.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tracemod::io::detail {

inline std::string typed(const Shape& s, DType d) { return s.to_string() + " " + std::string(dtype_name(d)); }

/// `out`, the output of a getattr of `path` on module node `base`.
[[nodiscard]] inline std::string get_attr_problem(const graph::Node& base, const std::string& path, const graph::Node& out) {
  const Module* m = static_cast<const graph::ModuleNode&>(base).owner();
  if (m == nullptr) return "the module of node '" + base.name() + "' cannot be resolved";
  std::string why;
  if (!m->has_attr(path)) {
    try {
      (void)m->getattr(path);
    } catch (const error& e) {
      why = e.what();
    }
    return "getattr(" + base.name() + ", \"" + path + "\") names no attribute of " + std::string(m->type_name()) +
           (why.empty() ? "" : " (" + why + ")");
  }
  const ConstAttrRef ref = m->getattr(path);
  if (ref.is_none()) return "getattr(" + base.name() + ", \"" + path + "\") is None";
  const bool is_module = ref.kind() == member_kind::module;
  if (is_module != !out.is_tensor())
    return "getattr(" + base.name() + ", \"" + path + "\") is a " + std::string(to_string(ref.kind())) + ", but node '" +
           out.name() + "' is saved as a " + (out.is_tensor() ? "tensor" : "module");
  if (is_module) {
    const Module& child = ref.module();
    const std::string& saved = static_cast<const graph::ModuleNode&>(out).module_type();
    if (child.is_builtin() && saved != child.type_name())
      return "node '" + out.name() + "' is saved as a " + saved + ", but attribute '" + path + "' is a " +
             std::string(child.type_name());
    return {};
  }
  const auto& node = static_cast<const graph::TensorNode&>(out);
  const Tensor& t = ref.tensor();
  if (node.shape() != t.shape() || node.dtype() != t.dtype())
    return "node '" + out.name() + "' is saved as " + typed(node.shape(), node.dtype()) + ", but attribute '" + path +
           "' is " + typed(t.shape(), t.dtype());
  return {};
}

/// Module call `e`, whose output shapes and dtypes were read from the file.
[[nodiscard]] inline std::string module_call_problem(const graph::Expr& e) {
  const auto* callee = static_cast<const graph::ModuleNode*>(e.inputs().front());
  const Module* m = callee->owner();
  if (m == nullptr) return "the module of node '" + callee->name() + "' cannot be resolved";
  const std::string who = "module call '" + callee->name() + "' (" + std::string(m->type_name()) + ")";
  std::vector<const graph::Node*> args;
  const std::vector<graph::CallArg> all = e.args();
  for (std::size_t i = 1; i < all.size(); ++i)
    if (const auto* n = std::get_if<graph::Node*>(&all[i])) args.push_back(*n);
  const auto output = [&](std::size_t k) { return static_cast<const graph::TensorNode*>(e.output(k)); };
  if (m->is_builtin()) {
    std::vector<Shape> shapes;
    for (const graph::Node* n : args) {
      if (!n->is_tensor()) return who + ": node '" + n->name() + "' is a module; a builtin module takes tensors";
      shapes.push_back(static_cast<const graph::TensorNode*>(n)->shape());
    }
    if (args.size() + 1 != all.size()) return who + ": a builtin module takes tensors only";
    const Shape inferred = m->infer_shape_erased(shapes);
    if (e.output_count() != 1 || output(0)->shape() != inferred || output(0)->dtype() != DType::float32)
      return who + ": the saved output " +
             (e.output_count() == 1 ? typed(output(0)->shape(), output(0)->dtype())
                                    : std::to_string(e.output_count()) + " outputs") +
             " differs from the module's " + typed(inferred, DType::float32);
    return {};
  }
  const auto* holder = dynamic_cast<const graph::GraphHolder*>(m);
  const graph::Graph* sub = holder != nullptr ? holder->graph_for(e.call_signature()) : nullptr;
  if (sub == nullptr) return who + " has no graph for forward" + e.call_signature();
  const std::vector<graph::Node*> ins = sub->inputs();
  if (ins.size() != args.size() + 1)
    return who + " passes " + std::to_string(args.size()) + " values to a graph taking " + std::to_string(ins.size() - 1);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const graph::Node* a = args[i];
    const graph::Node* p = ins[i + 1];
    if (a->is_tensor() != p->is_tensor())
      return who + ": argument '" + a->name() + "' and input '" + p->name() + "' are not of the same kind";
    if (!a->is_tensor()) continue;
    const auto* at = static_cast<const graph::TensorNode*>(a);
    const auto* pt = static_cast<const graph::TensorNode*>(p);
    if (at->shape() != pt->shape() || at->dtype() != pt->dtype())
      return who + ": argument '" + a->name() + "' is " + typed(at->shape(), at->dtype()) + ", but the graph's input '" +
             p->name() + "' is " + typed(pt->shape(), pt->dtype());
  }
  const std::vector<graph::Node*> outs = sub->outputs();
  if (outs.size() != e.output_count())
    return who + " has " + std::to_string(e.output_count()) + " outputs, its graph returns " + std::to_string(outs.size());
  for (std::size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k]->is_tensor()) return who + ": its graph returns module node '" + outs[k]->name() + "'";
    const auto* r = static_cast<const graph::TensorNode*>(outs[k]);
    if (r->shape() != output(k)->shape() || r->dtype() != output(k)->dtype())
      return who + ": output '" + output(k)->name() + "' is saved as " + typed(output(k)->shape(), output(k)->dtype()) +
             ", but the graph returns " + typed(r->shape(), r->dtype());
  }
  return {};
}

/// Config integers are sizes, counts and strides: beyond int32 they are no model's, and
/// arithmetic on them (padding 2^62 doubled) would overflow.
[[nodiscard]] inline std::string config_integer_problem(const Value& v) {
  if (v.kind() == Value::Kind::integer) {
    if (v.integer() < std::numeric_limits<std::int32_t>::min() || v.integer() > std::numeric_limits<std::int32_t>::max())
      return "config value " + std::to_string(v.integer()) + " is out of the int32 range";
  } else if (v.kind() == Value::Kind::list || v.kind() == Value::Kind::tuple) {
    for (const Value& x : v.items())
      if (std::string why = config_integer_problem(x); !why.empty()) return why;
  } else if (v.kind() == Value::Kind::dict) {
    for (const auto& kv : v.dict_items())
      if (std::string why = config_integer_problem(kv.second); !why.empty()) return why;
  }
  return {};
}

/// Gives the exprs (and their nodes) that loaders inserted the ids that follow the largest ids of
/// the loaded modules, as surgery would, and makes the top module's total_ids count past them.
inline void number_inserted(TracedModule& root, const std::vector<TracedModule*>& traced,
                            const std::vector<graph::Expr*>& inserted) {
  if (inserted.empty()) return;
  const std::unordered_set<const graph::Expr*> fresh(inserted.begin(), inserted.end());
  std::int64_t next_node = root.total_ids().first, next_expr = root.total_ids().second;
  for (const TracedModule* tm : traced)
    for (const auto& [sig, g] : tm->graphs())
      for (const graph::Expr* e : g->exprs(false)) {
        if (fresh.count(e) != 0) continue;
        next_expr = std::max(next_expr, e->id() + 1);
        for (const graph::Node* n : e->outputs()) next_node = std::max(next_node, n->id() + 1);
      }
  graph::IdAllocator ids({next_node, next_expr});
  for (graph::Expr* e : inserted) ids.number(*e);
  root.set_total_ids(ids.next());
}

}  // namespace tracemod::io::detail
