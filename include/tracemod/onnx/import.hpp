// tmod::onnx::import_model: an ONNX model as a TracedModule whose top graph is a flat list of
// CallFunction exprs (the import table's ops) with the initializers as its attributes, read through
// getattr. The result prints, runs, takes surgery and saves like a traced module. A model that is
// not valid ONNX is refused first, with a format_error naming the node or value. Then every op,
// attribute and element type tracemod cannot represent is collected; the import fails with one
// value_error listing all of them.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/check.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/onnx/fold.hpp>
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

/// format_error unless the model has an IR version and imports one opset of the default domain that
/// the installed ONNX defines (IR version 3 on; before, opset 1 is implied).
inline void check_opsets(const proto::ModelProto& m) {
  if (m.ir_version() <= 0)
    throw format_error("onnx import: the model has no ir_version (an empty or non-ONNX file parses as such a model)");
  const int latest = proto::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second;
  std::set<std::string> domains;
  for (const proto::OperatorSetIdProto& o : m.opset_import()) {
    const bool onnx_domain = o.domain().empty() || o.domain() == "ai.onnx";
    if (!domains.insert(onnx_domain ? "" : o.domain()).second)
      throw format_error("onnx import: opset_import lists domain '" + o.domain() + "' twice");
    if (onnx_domain && (o.version() < 1 || o.version() > latest))
      throw format_error("onnx import: opset " + std::to_string(o.version()) + " of the default domain; ONNX " +
                         proto::LAST_RELEASE_VERSION + " defines opsets 1 to " + std::to_string(latest));
  }
  if (domains.count("") == 0 && m.ir_version() >= 3)
    throw format_error("onnx import: opset_import names no opset of the default ONNX domain");
}

/// A cycle among the nodes, written "node 'a' (Add) -> 'v' -> node 'b' (Relu) -> 'w' -> node 'a' (Add)",
/// or "" when there is none. Kahn's algorithm removes every node not on or after a cycle; walking
/// back from a remaining node along remaining producers must then come round to a node seen before.
inline std::string cycle_of(const proto::GraphProto& g, const std::unordered_map<std::string, int>& producer) {
  const auto count = static_cast<std::size_t>(g.node_size());
  std::vector<int> pending(count, 0);
  std::vector<std::vector<int>> consumers(count);
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& in : g.node(i).input())
      if (const auto p = producer.find(in); p != producer.end()) {
        ++pending[static_cast<std::size_t>(i)];
        consumers[static_cast<std::size_t>(p->second)].push_back(i);
      }
  std::vector<int> ready;
  for (int i = 0; i < g.node_size(); ++i)
    if (pending[static_cast<std::size_t>(i)] == 0) ready.push_back(i);
  while (!ready.empty()) {
    const int i = ready.back();
    ready.pop_back();
    for (int c : consumers[static_cast<std::size_t>(i)])
      if (--pending[static_cast<std::size_t>(c)] == 0) ready.push_back(c);
  }
  const auto left = std::find_if(pending.begin(), pending.end(), [](int p) { return p > 0; });
  if (left == pending.end()) return "";
  std::vector<std::pair<int, std::string>> walk;  // (node, the value it reads from the next node of the walk)
  std::vector<int> seen_at(count, -1);
  int node = static_cast<int>(left - pending.begin());
  while (seen_at[static_cast<std::size_t>(node)] < 0) {
    seen_at[static_cast<std::size_t>(node)] = static_cast<int>(walk.size());
    for (const std::string& in : g.node(node).input())
      if (const auto p = producer.find(in); p != producer.end() && pending[static_cast<std::size_t>(p->second)] > 0) {
        walk.emplace_back(node, in);
        node = p->second;
        break;
      }
  }
  std::string s = node_ref(g.node(node), node);
  for (auto i = walk.size(); i-- > static_cast<std::size_t>(seen_at[static_cast<std::size_t>(node)]);)
    s += " -> '" + walk[i].second + "' -> " + node_ref(g.node(walk[i].first), walk[i].first);
  return s;
}

/// format_error unless every value has one source (a graph input, an initializer or one node's
/// output), every node reads only values defined before it (ONNX's topological order), and the graph
/// has outputs, each defined. Returns the producing node of every node output.
inline std::unordered_map<std::string, int> check_dataflow(const proto::GraphProto& g) {
  const std::string where = "onnx import: graph '" + g.name() + "': ";
  std::unordered_map<std::string, std::string> sources;  // graph inputs and initializers
  for (const proto::ValueInfoProto& v : g.input())
    if (!sources.emplace(v.name(), "a graph input").second) throw format_error(where + "input '" + v.name() + "' is listed twice");
  std::set<std::string> initializers;
  for (const proto::TensorProto& t : g.initializer()) {
    if (!initializers.insert(t.name()).second) throw format_error(where + "initializer '" + t.name() + "' is given twice");
    sources.emplace(t.name(), "an initializer");
  }
  for (const proto::SparseTensorProto& t : g.sparse_initializer())
    if (!sources.emplace(t.values().name(), "an initializer").second)
      throw format_error(where + "sparse initializer '" + t.values().name() + "' is given twice");
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& out : g.node(i).output()) {
      if (out.empty()) continue;  // an optional output left out
      if (const auto s = sources.find(out); s != sources.end())
        throw format_error(where + node_ref(g.node(i), i) + " writes '" + out + "', which is " + s->second);
      if (const auto [p, fresh] = producer.emplace(out, i); !fresh)
        throw format_error(where + "value '" + out + "' is produced by two nodes, " + node_ref(g.node(p->second), p->second) +
                           " and " + node_ref(g.node(i), i));
    }
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& in : g.node(i).input()) {
      if (in.empty() || sources.count(in) != 0) continue;
      const auto p = producer.find(in);
      if (p == producer.end())
        throw format_error(where + node_ref(g.node(i), i) + " reads '" + in + "', which no node, input or initializer produces");
      if (p->second < i) continue;
      if (const std::string cycle = cycle_of(g, producer); !cycle.empty())
        throw format_error(where + "the nodes form a cycle: " + cycle);
      throw format_error(where + node_ref(g.node(i), i) + " reads '" + in + "' before " +
                         node_ref(g.node(p->second), p->second) + " produces it (ONNX lists nodes in topological order)");
    }
  if (g.output_size() == 0) throw format_error(where + "the graph declares no outputs");
  for (const proto::ValueInfoProto& v : g.output())
    if (sources.count(v.name()) == 0 && producer.count(v.name()) == 0)
      throw format_error(where + "output '" + v.name() + "' is produced by no node, input or initializer");
  return producer;
}

/// format_error unless the model is valid ONNX: the checks above with messages naming nodes and
/// values, every initializer well formed, then ONNX's own checker for everything else it defines.
inline void check_model(const proto::ModelProto& model) {
  check_opsets(model);
  (void)check_dataflow(model.graph());
  for (const proto::TensorProto& t : model.graph().initializer()) check_tensor(t, "onnx import: initializer");
  try {
    proto::checker::check_model(model);
  } catch (const std::exception& e) {
    throw format_error("onnx import: model '" + model.graph().name() + "' fails ONNX's checker: " + e.what());
  }
}

/// The static shape of graph input `v`: its extents, with symbolic ones taken from `options` (and
/// recorded in `symbols`); format_error for a negative extent or a size no tensor can have.
inline Shape input_shape(const proto::ValueInfoProto& v, const ImportOptions& options,
                         std::map<std::string, std::int64_t>& symbols, DType dtype) {
  const std::string where = "onnx import: input '" + v.name() + "'";
  Shape shape;
  std::string symbolic;
  for (const proto::TensorShapeProto_Dimension& d : v.type().tensor_type().shape().dim()) {
    if (shape.rank() == Shape::max_rank) throw format_error(where + " has too many axes");
    std::int64_t extent = d.dim_value();
    if (!d.has_dim_value()) {
      const auto it = options.dims.find(d.dim_param());
      extent = it != options.dims.end() ? it->second : options.default_dim;
      if (!d.dim_param().empty()) symbols.emplace(d.dim_param(), extent);
      symbolic += ", '" + d.dim_param() + "' = " + std::to_string(extent);
    }
    if (extent < 0)
      throw format_error(where + ": axis " + std::to_string(shape.rank()) + " has the negative extent " +
                         std::to_string(extent) + (d.has_dim_value() ? "" : " (symbolic dimension '" + d.dim_param() + "')"));
    shape.push_back(extent);
  }
  try {
    (void)Tensor::byte_size(shape, dtype, where);
  } catch (const shape_error& e) {
    throw format_error(std::string(e.what()) + (symbolic.empty() ? "" : " (symbolic dimensions" + symbolic.substr(1) + ")"));
  }
  return shape;
}

/// format_error unless graph output `v` computes what the model declares: its element type (int32 for
/// INT64) and, when
/// declared, its rank and its extents (numbers, and symbols an input bound).
inline void check_output(const proto::ValueInfoProto& v, const graph::Node* n, const std::map<std::string, std::int64_t>& symbols) {
  const auto* t = static_cast<const graph::TensorNode*>(n);
  const std::string where = "onnx import: output '" + v.name() + "' is declared ";
  if (!v.type().has_tensor_type()) throw format_error(where + "as no tensor; the graph computes one");
  const proto::TypeProto_Tensor& tt = v.type().tensor_type();
  // tracemod computes ONNX's INT64 integers (indices, shapes) in int32: an INT64 output is int32.
  const bool int64_as_int32 = tt.elem_type() == proto::TensorProto::INT64 && t->dtype() == DType::int32;
  if (tt.elem_type() != elem_type_of(t->dtype()) && !int64_as_int32)
    throw format_error(where + elem_type_name(tt.elem_type()) + "; the graph computes " + elem_type_name(elem_type_of(t->dtype())));
  if (!tt.has_shape()) return;
  bool same = tt.shape().dim_size() == static_cast<int>(t->shape().rank());
  for (int i = 0; same && i < tt.shape().dim_size(); ++i) {
    const proto::TensorShapeProto_Dimension& d = tt.shape().dim(i);
    const auto symbol = d.dim_param().empty() ? symbols.end() : symbols.find(d.dim_param());
    const std::int64_t extent = t->shape()[static_cast<std::size_t>(i)];
    same = d.has_dim_value() ? d.dim_value() == extent : symbol == symbols.end() || symbol->second == extent;
  }
  if (!same) {
    std::string declared = "(";
    for (const proto::TensorShapeProto_Dimension& d : tt.shape().dim())
      declared += (declared.size() > 1 ? ", " : "") + (d.has_dim_value() ? std::to_string(d.dim_value()) : d.dim_param().empty() ? "?" : d.dim_param());
    throw format_error(where + "of shape " + declared + (tt.shape().dim_size() == 1 ? ",)" : ")") + "; the graph computes " +
                       t->shape().to_string());
  }
}

/// Imports every node of `pg` in order: computed at import time when fold() can, else through its
/// import rule. What cannot be imported goes to `problems`, and the values it would have produced to
/// `failed` (their readers are not reported again).
inline void import_nodes(Importer& im, const proto::GraphProto& pg, std::vector<std::string>& problems,
                         std::unordered_set<std::string>& failed) {
  for (int index = 0; index < pg.node_size(); ++index) {
    const proto::NodeProto& n = pg.node(index);
    const std::string where = node_ref(n, index);
    const std::size_t before = problems.size();
    const bool blocked = std::any_of(n.input().begin(), n.input().end(), [&](const std::string& i) { return failed.count(i) != 0; });
    try {
      if (!blocked && fold(im, n)) continue;
      const import_rule* rule = (n.domain().empty() || n.domain() == "ai.onnx") ? find_rule(n.op_type()) : nullptr;
      if (rule == nullptr) {
        problems.push_back(where + ": op " + (n.domain().empty() ? "" : n.domain() + ".") + n.op_type());
      } else {
        for (const proto::AttributeProto& a : n.attribute())
          if (std::find(rule->attributes.begin(), rule->attributes.end(), a.name()) == rule->attributes.end())
            problems.push_back(where + ": attribute '" + a.name() + "'");
      }
      if (problems.size() == before && !blocked) rule->convert(im, n);
    } catch (const format_error& e) {
      throw format_error("onnx import: " + where + ": " + e.what());
    } catch (const error& e) {
      problems.push_back(where + ": " + e.what());
    }
    if (problems.size() != before || blocked)
      for (const std::string& o : n.output()) failed.insert(o);
  }
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

/// The TracedModule of an ONNX model. format_error if the model is not valid ONNX (see
/// detail::check_model, and outputs that differ from their declared type or shape); value_error
/// listing every unsupported op, attribute and element type at once.
[[nodiscard]] inline TracedModule import_model(const proto::ModelProto& model, const ImportOptions& options = {}) {
  using namespace detail;
  check_model(model);
  const proto::GraphProto& pg = model.graph();
  const std::string type = pg.name().empty() ? std::string("OnnxModel") : graph::NameSpace::sanitize(pg.name());
  TracedModule tm(type);
  graph::Graph& g = tm.add_graph("", std::make_unique<graph::Graph>(type, type, &tm));
  g.add_self_input("Module");
  Importer im(tm, g, default_opset(model));
  std::vector<std::string> problems;
  std::unordered_set<std::string> failed;  // values a refused node would have produced
  std::map<std::string, std::int64_t> symbols;  // the symbolic dimensions of the inputs and their values

  for (const proto::OperatorSetIdProto& o : model.opset_import())
    if (!o.domain().empty() && o.domain() != "ai.onnx")
      problems.push_back("opset domain '" + o.domain() + "' (tracemod reads the default ONNX domain only)");
  for (const proto::SparseTensorProto& t : pg.sparse_initializer()) {
    problems.push_back("sparse initializer '" + t.values().name() + "'");
    failed.insert(t.values().name());
  }
  for (const proto::TensorProto& t : pg.initializer()) im.add_static(t.name(), t, true);
  for (const auto& [name, t] : options.constant_inputs) im.add_static(name, t, false);
  for (const proto::ValueInfoProto& v : pg.input()) {
    if (im.is_static(v.name())) continue;
    const proto::TypeProto_Tensor& tt = v.type().tensor_type();
    const std::string where = "input '" + v.name() + "'";
    if (!v.type().has_tensor_type() || !dtype_of_elem_type(tt.elem_type())) {
      problems.push_back(where + (v.type().has_tensor_type()
                                      ? ": element type " + elem_type_name(tt.elem_type()) +
                                            " (tracemod holds FLOAT, INT32 and BOOL)"
                                      : ": not a tensor (sequences, maps and optionals are unsupported)"));
      failed.insert(v.name());
      continue;
    }
    const DType dtype = *dtype_of_elem_type(tt.elem_type());
    graph::TensorNode* in = g.add_tensor_input(v.name(), input_shape(v, options, symbols, dtype), dtype);
    if (options.dynamic_dims) {
      Dims d = to_dims(in->shape());
      const auto& dims = tt.shape().dim();
      for (int i = 0; i < dims.size(); ++i)
        if (!dims[i].has_dim_value() && !dims[i].dim_param().empty())
          d[static_cast<std::size_t>(i)] = DimExpr::symbol(dims[i].dim_param());
      in->set_dims(d);
    }
    im.bind(v.name(), in, false);
  }

  import_nodes(im, pg, problems, failed);

  std::vector<graph::NodeTree> outputs;
  for (const proto::ValueInfoProto& v : pg.output()) {
    if (failed.count(v.name()) != 0) continue;
    try {
      graph::Node* n = im.tensor(v.name());
      check_output(v, n, symbols);
      outputs.push_back(graph::NodeTree::leaf(n));
    } catch (const format_error&) {
      throw;
    } catch (const error& e) {  // an initializer tracemod cannot hold, returned as it is
      problems.push_back("output '" + v.name() + "': " + e.what());
    }
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
