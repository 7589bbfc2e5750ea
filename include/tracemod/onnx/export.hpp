// tmod::onnx::export_model: a TracedModule as an ONNX model. The module is flattened (user modules
// inlined), every expr becomes the ONNX nodes its op's or module's rule gives it, module tensors become
// initializers named by their attribute paths, graph inputs and outputs keep their node names. The
// model must pass onnx::checker::check_model and ONNX's shape inference before anything is written;
// an unmapped op refuses the whole export, so no partial file is ever left behind.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/onnx/emitter.hpp>
#include <tracemod/onnx/export_table.hpp>
#include <tracemod/onnx/proto.hpp>
#include <tracemod/traced_module/traced_module.hpp>
#include <tracemod/version.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

namespace tracemod::onnx {

namespace detail {

inline std::string where(const graph::Expr& e) {
  return "%" + std::to_string(e.id()) + " (" + (e.is_module_call() ? e.inputs()[0]->name() : e.target()) + ")";
}

/// The attribute path of a module or tensor node made by getattr ("layer1.0.conv1").
inline std::string path_of(const graph::Node& n) {
  const graph::Expr* e = n.expr();
  return e != nullptr && e->kind() == graph::ExprKind::get_attr ? e->name() : n.name();
}

/// Every call of `g` that has no ONNX mapping, described for one message; empty when all map.
inline std::vector<std::string> unmapped(const graph::Graph& g) {
  std::vector<std::string> out;
  for (const auto& up : g.expr_list_()) {
    const graph::Expr& e = *up;
    if (!e.is_call()) continue;
    if (e.is_module_call()) {
      const Module* m = e.callee();
      if (m == nullptr) {
        out.push_back(where(e) + ": the called module is missing");
      } else if (module_rule(m->type_name()) == nullptr) {
        out.push_back(where(e) + ": module type " + std::string(m->type_name()) +
                      (m->is_builtin() ? "" : " (a user module left after flatten)"));
      }
    } else if (!has_rule(*e.op())) {
      out.push_back(where(e) + ": op " + e.op()->target);
    }
  }
  return out;
}

inline void set_value_info(proto::ValueInfoProto& v, const std::string& name, const graph::TensorNode& n,
                           std::int64_t batch, bool dynamic_batch) {
  v.set_name(name);
  proto::TypeProto_Tensor& t = *v.mutable_type()->mutable_tensor_type();
  t.set_elem_type(elem_type_of(n.dtype()));
  proto::TensorShapeProto& s = *t.mutable_shape();
  if (n.is_dynamic()) {  // a graph traced with dynamic dims: its symbolic axes are dim_params
    for (const DimExpr& e : n.dims()) {
      proto::TensorShapeProto_Dimension& d = *s.add_dim();
      if (e.is_constant())
        d.set_dim_value(e.value());
      else
        d.set_dim_param(e.to_string());
    }
    return;
  }
  for (std::size_t i = 0; i < n.shape().rank(); ++i) {
    proto::TensorShapeProto_Dimension& d = *s.add_dim();
    if (i == 0 && dynamic_batch && batch >= 0 && n.shape()[0] == batch)
      d.set_dim_param("batch");
    else
      d.set_dim_value(n.shape()[i]);
  }
}

}  // namespace detail

namespace detail {

using node_names = std::unordered_map<const graph::Node*, std::string>;

/// An argument of a call as the ONNX rules take it.
inline Operand operand_of(const node_names& names, const graph::CallArg& a) {
  Operand o;
  if (const auto* n = std::get_if<graph::Node*>(&a)) {
    o.kind = Operand::Kind::tensor;
    o.name = names.at(*n);
    o.shape = static_cast<const graph::TensorNode*>(*n)->shape();
    o.dtype = static_cast<const graph::TensorNode*>(*n)->dtype();
  } else if (const auto* l = std::get_if<std::vector<graph::Node*>>(&a)) {
    o.kind = Operand::Kind::list;
    for (graph::Node* x : *l)
      o.list.push_back({.kind = Operand::Kind::tensor, .name = names.at(x), .shape = static_cast<const graph::TensorNode*>(x)->shape(),
                        .dtype = static_cast<const graph::TensorNode*>(x)->dtype()});
  } else if (const Value& v = std::get<Value>(a); v.is_number()) {
    o.kind = Operand::Kind::scalar;
    o.scalar = v.number();
  }
  return o;
}

/// A call expr through its op's or builtin module's ONNX rule.
inline void emit_call(Emitter& em, const graph::Expr& e, const node_names& names) {
  const graph::Node* out = e.output();
  Call c;
  c.where = where(e);
  c.out = out->name();
  c.out_shape = static_cast<const graph::TensorNode*>(out)->shape();
  const std::vector<graph::CallArg> args = e.args();
  if (e.is_module_call()) {
    for (std::size_t i = 1; i < args.size(); ++i) c.in.push_back(operand_of(names, args[i]));
    export_module(em, *e.callee(), path_of(*e.inputs()[0]), c);
    return;
  }
  for (std::size_t i = 0; i < e.op()->operands.size(); ++i) c.in.push_back(operand_of(names, args[i]));
  std::vector<Value> params;
  const std::vector<std::pair<std::string, graph::CallArg>> named = e.named_args();
  for (std::size_t i = e.op()->operands.size(); i < named.size(); ++i) params.push_back(std::get<Value>(named[i].second));
  const functional::erased_params p = e.op()->make_params(params);
  export_op(em, *e.op(), p.get(), c);
}

/// One expr of the flattened graph: a weight or constant becomes an initializer, a call its nodes.
inline void emit_expr(Emitter& em, const graph::Expr& e, node_names& names) {
  graph::Node* out = e.output();
  switch (e.kind()) {
    case graph::ExprKind::get_attr:
      if (out->is_tensor()) {
        const Module* owner = static_cast<const graph::ModuleNode*>(e.inputs()[0])->owner();
        if (owner == nullptr) throw graph_error("onnx export: " + where(e) + ": the attribute's module is missing");
        names[out] = em.weight(owner->getattr(e.name()).tensor(), path_of(*out));
      }
      break;
    case graph::ExprKind::constant:
      if (out->is_tensor()) names[out] = em.initializer(e.const_tensor(), out->name());
      break;
    case graph::ExprKind::call_function:
    case graph::ExprKind::call_method:
      emit_call(em, e, names);
      names[out] = out->name();
      break;
    case graph::ExprKind::input: break;
  }
}

/// The graph's outputs; an output must be a node's result, once: an input, weight or repeated
/// output gets an Identity.
inline void emit_outputs(Emitter& em, proto::GraphProto& pg, const graph::Graph& g, const node_names& names,
                         std::int64_t batch, const ExportOptions& options) {
  std::vector<std::string> output_names;
  for (const graph::Node* n : g.outputs()) {
    if (!n->is_tensor()) throw graph_error("onnx export: output '" + n->name() + "' is a module, not a tensor");
    std::string name = names.at(n);
    const bool produced = n->expr()->is_call();
    if (!produced || std::find(output_names.begin(), output_names.end(), name) != output_names.end())
      name = em.node1("Identity", {name}, em.fresh(n->name() + "_output"));
    output_names.push_back(name);
    set_value_info(*pg.add_output(), name, *static_cast<const graph::TensorNode*>(n), batch, options.dynamic_batch);
  }
}

/// ONNX's checker, then strict shape inference, which also records the inferred intermediate shapes
/// in the model (value_info).
inline void check_and_infer_shapes(proto::ModelProto& model, std::string_view type_name) {
  try {
    proto::checker::check_model(model);
    proto::shape_inference::InferShapes(model, proto::OpSchemaRegistry::Instance(),
                                        proto::ShapeInferenceOptions(/*check_type=*/true, /*error_mode=*/1));
  } catch (const std::exception& ex) {
    throw graph_error("onnx export: ONNX rejects the exported model of " + std::string(type_name) + ": " + ex.what());
  }
}

}  // namespace detail

/// The ONNX model of a traced module, checked by onnx::checker and ONNX's shape inference.
/// Throws value_error naming every op or module without an ONNX mapping (and nothing is built).
[[nodiscard]] inline proto::ModelProto to_onnx(const TracedModule& traced, const ExportOptions& options = {}) {
  using namespace detail;
  if (options.opset < 13 || options.opset > 17)
    throw value_error("onnx export: opset " + std::to_string(options.opset) +
                      " is not supported (13 to 17: the opsets in which every mapped op has today's meaning)");
  const TracedModule flat = traced.flatten();
  const graph::Graph& g = flat.graph();
  if (const std::vector<std::string> missing = unmapped(g); !missing.empty()) {
    std::string list;
    for (const std::string& m : missing) list += "\n  " + m;
    throw value_error("onnx export: " + std::to_string(missing.size()) + " call" + (missing.size() == 1 ? " has" : "s have") +
                      " no ONNX mapping (nothing was written):" + list);
  }

  proto::ModelProto model;
  model.set_ir_version(proto::IR_VERSION);
  model.set_producer_name("tracemod");
  model.set_producer_version(TRACEMOD_VERSION_STRING);
  proto::OperatorSetIdProto& opset = *model.add_opset_import();
  opset.set_domain("");
  opset.set_version(options.opset);
  proto::GraphProto& pg = *model.mutable_graph();
  pg.set_name(std::string(traced.type_name()));
  Emitter em(pg, options);

  node_names names;
  const std::vector<graph::Node*> inputs = g.inputs();
  for (const graph::Expr* e : g.exprs(false))
    for (const graph::Node* n : e->outputs()) em.reserve(n->name());
  std::int64_t batch = -1;
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    const auto* t = static_cast<const graph::TensorNode*>(inputs[i]);
    if (batch < 0 && t->shape().rank() > 0) batch = t->shape()[0];
    names[t] = t->name();
    set_value_info(*pg.add_input(), t->name(), *t, batch, options.dynamic_batch);
  }
  for (const auto& up : g.expr_list_()) emit_expr(em, *up, names);
  emit_outputs(em, pg, g, names, batch, options);
  check_and_infer_shapes(model, traced.type_name());
  return model;
}

/// Writes the ONNX model of `traced` to `path` (see to_onnx). The file appears complete or not at
/// all: the bytes go to a temporary file that is renamed over `path` once written.
inline void export_model(const TracedModule& traced, const std::filesystem::path& path, const ExportOptions& options = {}) {
  const std::string bytes = to_onnx(traced, options).SerializeAsString();
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f.flush()) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw format_error("onnx export: cannot write '" + tmp.string() + "'");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw format_error("onnx export: cannot write '" + path.string() + "'");
  }
}

}  // namespace tracemod::onnx
