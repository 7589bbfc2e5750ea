// tmod::onnx::import_model: an ONNX model as a TracedModule whose top graph is a flat list of
// CallFunction exprs (the import table's ops) with the initializers as its attributes, read through
// getattr. The result prints, runs, takes surgery and saves like a traced module. Every op,
// attribute and element type tracemod cannot represent is collected; the import then fails with one
// value_error listing all of them.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/check.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/onnx/import_table.hpp>
#include <tracemod/onnx/importer.hpp>
#include <tracemod/onnx/proto.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

namespace tracemod::onnx {

namespace detail {

inline std::int64_t default_opset(const proto::ModelProto& m) {
  for (const proto::OperatorSetIdProto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 1;
}

inline std::string node_ref(const proto::NodeProto& n, int index) {
  return "node " + (n.name().empty() ? "#" + std::to_string(index) : "'" + n.name() + "'") + " (" + n.op_type() + ")";
}

}  // namespace detail

/// The graph inputs that import reads at import time (a Reshape's shape, Clip's bounds, ...): bind
/// them with ImportOptions::constant_inputs, or the import reports them as unsupported.
[[nodiscard]] inline std::vector<std::string> constant_input_names(const proto::ModelProto& model) {
  std::set<std::string> initializers;
  for (const proto::TensorProto& t : model.graph().initializer()) initializers.insert(t.name());
  std::set<std::string> inputs;
  for (const proto::ValueInfoProto& v : model.graph().input())
    if (initializers.count(v.name()) == 0) inputs.insert(v.name());
  std::vector<std::string> out;
  for (const proto::NodeProto& n : model.graph().node())
    if (const detail::import_rule* r = detail::find_rule(n.op_type()))
      for (int i : r->static_inputs)
        if (i < n.input_size() && inputs.count(n.input(i)) != 0 &&
            std::find(out.begin(), out.end(), n.input(i)) == out.end())
          out.push_back(n.input(i));
  return out;
}

/// The TracedModule of an ONNX model; value_error listing every unsupported op, attribute and
/// element type at once.
[[nodiscard]] inline TracedModule import_model(const proto::ModelProto& model, const ImportOptions& options = {}) {
  using namespace detail;
  const proto::GraphProto& pg = model.graph();
  const std::string type = pg.name().empty() ? std::string("OnnxModel") : graph::NameSpace::sanitize(pg.name());
  TracedModule tm(type);
  graph::Graph& g = tm.add_graph("", std::make_unique<graph::Graph>(type, type, &tm));
  g.add_self_input("Module");
  Importer im(tm, g, default_opset(model));
  std::vector<std::string> problems;
  std::unordered_set<std::string> failed;  // values a refused node would have produced

  for (const proto::OperatorSetIdProto& o : model.opset_import())
    if (!o.domain().empty() && o.domain() != "ai.onnx")
      problems.push_back("opset domain '" + o.domain() + "' (tracemod reads the default ONNX domain only)");
  for (const proto::TensorProto& t : pg.initializer()) im.add_static(t.name(), t, true);
  for (const auto& [name, t] : options.constant_inputs) im.add_static(name, t, false);
  for (const proto::ValueInfoProto& v : pg.input()) {
    if (im.is_static(v.name())) continue;
    const proto::TypeProto_Tensor& tt = v.type().tensor_type();
    const std::string where = "input '" + v.name() + "'";
    DType dtype = DType::float32;
    if (!v.type().has_tensor_type()) {
      problems.push_back(where + ": not a tensor (sequences, maps and optionals are unsupported)");
      failed.insert(v.name());
      continue;
    }
    if (tt.elem_type() == proto::TensorProto::INT32) {
      dtype = DType::int32;
    } else if (tt.elem_type() != proto::TensorProto::FLOAT) {
      problems.push_back(where + ": element type " + elem_type_name(tt.elem_type()) + " (tracemod computes in float32)");
      failed.insert(v.name());
      continue;
    }
    Shape shape;
    for (const proto::TensorShapeProto_Dimension& d : tt.shape().dim()) {
      if (shape.rank() == Shape::max_rank) throw format_error("onnx import: " + where + " has too many axes");
      if (d.has_dim_value()) {
        shape.push_back(d.dim_value());
      } else {
        const auto it = options.dims.find(d.dim_param());
        shape.push_back(it != options.dims.end() ? it->second : options.default_dim);
      }
    }
    im.bind(v.name(), g.add_tensor_input(v.name(), shape, dtype), false);
  }

  for (int index = 0; index < pg.node_size(); ++index) {
    const proto::NodeProto& n = pg.node(index);
    const std::string where = node_ref(n, index);
    const std::size_t before = problems.size();
    const import_rule* rule = (n.domain().empty() || n.domain() == "ai.onnx") ? find_rule(n.op_type()) : nullptr;
    if (rule == nullptr) {
      problems.push_back(where + ": op " + (n.domain().empty() ? "" : n.domain() + ".") + n.op_type());
    } else {
      for (const proto::AttributeProto& a : n.attribute())
        if (std::find(rule->attributes.begin(), rule->attributes.end(), a.name()) == rule->attributes.end())
          problems.push_back(where + ": attribute '" + a.name() + "'");
    }
    const bool blocked = std::any_of(n.input().begin(), n.input().end(), [&](const std::string& i) { return failed.count(i) != 0; });
    if (problems.size() == before && !blocked) {
      try {
        rule->convert(im, n);
      } catch (const error& e) {
        problems.push_back(where + ": " + e.what());
      }
    }
    if (problems.size() != before || blocked)
      for (const std::string& o : n.output()) failed.insert(o);
  }

  std::vector<graph::NodeTree> outputs;
  for (const proto::ValueInfoProto& v : pg.output()) {
    if (failed.count(v.name()) != 0) continue;
    if (!im.known(v.name())) {
      problems.push_back("output '" + v.name() + "' is produced by no node");
      continue;
    }
    outputs.push_back(graph::NodeTree::leaf(im.tensor(v.name())));
  }
  if (!problems.empty()) {
    std::string list;
    for (const std::string& p : problems) list += "\n  " + p;
    throw value_error("onnx import: " + std::to_string(problems.size()) + " unsupported feature" +
                      (problems.size() == 1 ? "" : "s") + " in model '" + pg.name() + "':" + list);
  }
  g.set_outputs(outputs.size() == 1 ? outputs.front() : graph::NodeTree::tuple(std::move(outputs)));
  g.compile();
  tm.set_top(true);
  tm.reset_ids();
  graph::check(g);
  return tm;
}

/// Reads an ONNX file (see import_model above); format_error if it is no ONNX model.
[[nodiscard]] inline TracedModule import_model(const std::filesystem::path& path, const ImportOptions& options = {}) {
  proto::ModelProto model;
  read_proto(path, model);
  return import_model(model, options);
}

}  // namespace tracemod::onnx
