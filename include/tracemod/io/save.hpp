// tmod::save: a TracedModule to a self-contained file, loadable without the user's module classes
// (tmod::load, io/load.hpp). User modules come back as TracedModules with their graphs, builtin modules are
// rebuilt from nn::builtin_registry by type name and config, ops from the op registry by printed
// target with their params. The format (docs/file-format.md): a 64-byte header (magic, format
// version, library version, byte order, offsets, CRC32C of the header and of the JSON), a JSON
// description, then the tensor bytes, each blob 64-byte aligned with its own CRC32C. load() maps the
// file copy-on-write and the tensors use the mapped bytes in place.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/storage.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/graph/check.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/io/atomic_file.hpp>
#include <tracemod/io/crc32c.hpp>
#include <tracemod/io/format.hpp>
#include <tracemod/nn/builtin_registry.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tracemod {
namespace io::detail {

inline std::string dtype_str(DType d) { return std::string(dtype_name(d)); }

inline json shape_json(const Shape& s) {
  json a = json::array();
  for (std::size_t i = 0; i < s.rank(); ++i) a.push_back(s[i]);
  return a;
}

inline json qparams_json(const std::optional<QParams>& q) {
  if (!q) return nullptr;
  return json{{"dtype_meta", q->dtype_meta}, {"scale", q->scale}, {"zero_point", q->zero_point}};
}

class Writer {
 public:
  json doc = json::object();

  /// The index of `t` in the tensor table; blobs are shared by tensors that share storage.
  std::size_t tensor(const Tensor& t) {
    const auto [it, fresh] = blob_of_.try_emplace(t.storage_id(), blobs_.size());
    if (fresh) blobs_.push_back({bytes_of(t), t.nbytes()});
    Blob& b = blobs_[it->second];
    if (t.nbytes() > b.nbytes) {
      b.data = bytes_of(t);
      b.nbytes = t.nbytes();
    }
    json e{{"blob", it->second}, {"shape", shape_json(t.shape())}, {"dtype", dtype_str(t.dtype())}};
    if (t.qparams()) e["qparams"] = qparams_json(t.qparams());
    if (t.read_only()) e["read_only"] = true;  // e.g. an optimized module's kept weights
    tensors_.push_back(std::move(e));
    return tensors_.size() - 1;
  }

  json value(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::none: return nullptr;
      case Value::Kind::tensor: return json{{"tensor", tensor(v.tensor())}};
      case Value::Kind::integer: return v.integer();
      case Value::Kind::real: {
        const double x = v.real().value;
        json n = std::isnan(x) ? json("nan") : std::isinf(x) ? json(x > 0 ? "inf" : "-inf") : json(x);
        return json{{v.real().single ? "f32" : "f64", std::move(n)}};
      }
      case Value::Kind::boolean: return v.boolean();
      case Value::Kind::string: return v.string();
      case Value::Kind::list:
      case Value::Kind::tuple: {
        json a = json::array();
        for (const Value& x : v.items()) a.push_back(value(x));
        return json{{v.kind() == Value::Kind::tuple ? "tuple" : "list", std::move(a)}};
      }
      case Value::Kind::dict: {
        json a = json::array();
        for (const auto& [k, x] : v.dict_items()) a.push_back(json::array({k, value(x)}));
        return json{{"dict", std::move(a)}};
      }
    }
    return nullptr;
  }

  json node(const graph::Node& n) {
    json j{{"id", n.id()}, {"name", n.name()}, {"q", n.qualname()}};
    if (n.is_tensor()) {
      const auto& t = static_cast<const graph::TensorNode&>(n);
      j["shape"] = shape_json(t.shape());
      j["dtype"] = dtype_str(t.dtype());
      if (t.qparams()) j["qparams"] = qparams_json(t.qparams());
      if (t.is_dynamic()) j["dims"] = dims_json(t.dims());
      if (t.value() != nullptr) j["value"] = shape_value_json(*t.value());
    } else {
      j["module_type"] = static_cast<const graph::ModuleNode&>(n).module_type();
    }
    return j;
  }

  json arg(const graph::CallArg& a) {
    if (const auto* n = std::get_if<graph::Node*>(&a)) return json{{"node", (*n)->id()}};
    if (const auto* l = std::get_if<std::vector<graph::Node*>>(&a)) {
      json ids = json::array();
      for (const graph::Node* n : *l) ids.push_back(n->id());
      return json{{"nodes", std::move(ids)}};
    }
    return json{{"value", value(std::get<Value>(a))}};
  }

  json tree(const graph::NodeTree& t) {
    using K = graph::NodeTree::Kind;
    if (t.kind == K::leaf) return json{{"node", t.node->id()}};
    json a = json::array();
    for (std::size_t i = 0; i < t.children.size(); ++i)
      a.push_back(t.kind == K::dict ? json::array({t.keys[i], tree(t.children[i])}) : tree(t.children[i]));
    return json{{t.kind == K::tuple ? "tuple" : t.kind == K::list ? "list" : "dict", std::move(a)}};
  }

  json expr(graph::Expr& e) {
    using graph::ExprKind;
    json j{{"id", e.id()}};
    json outs = json::array();
    for (const graph::Node* n : e.outputs()) outs.push_back(node(*n));
    j["out"] = std::move(outs);
    const auto args = e.args();
    switch (e.kind()) {
      case ExprKind::input: break;
      case ExprKind::get_attr:
        j["kind"] = "get_attr";
        j["base"] = e.inputs().front()->id();
        j["path"] = e.name();
        break;
      case ExprKind::constant:
        if (!e.const_tensor().defined())
          throw format_error("save: constant expr %" + std::to_string(e.id()) + " holds a module; only tensor constants can be saved");
        j["kind"] = "constant";
        j["tensor"] = tensor(e.const_tensor());
        break;
      case ExprKind::call_method:
      case ExprKind::call_function:
        if (e.is_module_call()) {
          j["kind"] = "module_call";
          j["callee"] = e.inputs().front()->id();
          j["signature"] = e.call_signature();
          json a = json::array();
          for (std::size_t i = 1; i < args.size(); ++i) a.push_back(arg(args[i]));
          j["args"] = std::move(a);
        } else {
          const functional::op_entry& op = *e.op();
          j["kind"] = "op";
          j["target"] = op.target;
          json a = json::array(), p = json::array();
          for (std::size_t i = 0; i < op.operands.size(); ++i) a.push_back(arg(args[i]));
          for (const Value& v : e.params()) p.push_back(value(v));
          j["args"] = std::move(a);
          j["params"] = std::move(p);
        }
        break;
    }
    return j;
  }

  json graph_json(const std::string& signature, const graph::Graph& g) {
    json inputs = json::array();
    for (const graph::Node* n : g.inputs()) {
      json j = node(*n);
      j["expr"] = n->expr()->id();
      inputs.push_back(std::move(j));
    }
    json exprs = json::array();
    for (const auto& e : g.expr_list_()) exprs.push_back(expr(*e));
    return json{{"signature", signature}, {"name", g.name()},     {"qualname", g.qualname()},
                {"inputs", std::move(inputs)}, {"exprs", std::move(exprs)}, {"outputs", tree(g.output_tree())}};
  }

  /// A module attribute of a traced module: `alias` when the module was reached before by another
  /// attribute (its first path in pre-order, as named_modules lists it, holds it as "module").
  struct child_edge {
    std::string name;
    const Module* child;
    bool alias;
  };

  /// Each traced module's module attributes, the aliases marked.
  static std::unordered_map<const Module*, std::vector<child_edge>> module_edges(const TracedModule& root) {
    std::unordered_map<const Module*, std::vector<child_edge>> edges;
    std::vector<const Module*> stack{&root};
    while (!stack.empty()) {
      const Module* m = stack.back();
      stack.pop_back();
      if (dynamic_cast<const TracedModule*>(m) == nullptr || edges.count(m) != 0) continue;
      auto& list = edges[m];
      for (const auto& [name, child] : tracemod::detail::module_access::all_children(*m)) {
        list.push_back({name, &child, false});
        stack.push_back(&child);
      }
    }
    // Pre-order (named_modules' order), marking the attributes that reach a module already reached.
    std::unordered_set<const Module*> seen{&root};
    std::vector<child_edge*> walk;
    const auto push_children = [&](const Module* m) {
      if (const auto it = edges.find(m); it != edges.end())
        for (auto e = it->second.rbegin(); e != it->second.rend(); ++e) walk.push_back(&*e);
    };
    push_children(&root);
    while (!walk.empty()) {
      child_edge* e = walk.back();
      walk.pop_back();
      if (!seen.insert(e->child).second) {
        e->alias = true;
        continue;
      }
      push_children(e->child);
    }
    return edges;
  }

  /// The modules in file order: the root first, then breadth first, each module after every module
  /// that holds it (as an attribute or an alias), so that every module attribute points forward.
  static std::vector<const Module*> module_order(const TracedModule& root,
                                                 const std::unordered_map<const Module*, std::vector<child_edge>>& edges) {
    std::unordered_map<const Module*, std::size_t> holders;
    for (const auto& [m, list] : edges)
      for (const child_edge& e : list) ++holders[e.child];
    std::vector<const Module*> order{&root};
    for (std::size_t i = 0; i < order.size(); ++i)
      if (const auto it = edges.find(order[i]); it != edges.end())
        for (const child_edge& e : it->second)
          if (--holders[e.child] == 0) order.push_back(e.child);
    return order;
  }

  /// The module tree, flattened: module 0 is the root, every module has a larger index than each
  /// module holding it. A module held by several attributes is stored once; its first path holds it
  /// as "module", the others as "alias".
  void modules(const TracedModule& root) {
    json list = json::array();
    const auto edges = module_edges(root);
    const std::vector<const Module*> order = module_order(root, edges);
    std::unordered_map<const Module*, std::size_t> index_of;
    for (std::size_t i = 0; i < order.size(); ++i) index_of.emplace(order[i], i);
    for (std::size_t i = 0; i < order.size(); ++i) {
      const Module& m = *order[i];
      json j{{"type", std::string(m.type_name())}, {"training", m.training()}};
      if (const auto* tm = dynamic_cast<const TracedModule*>(&m)) {
        j["kind"] = "traced";
        j["top"] = tm->is_top();
        j["total_ids"] = json::array({tm->total_ids().first, tm->total_ids().second});
        json attrs = json::array();
        // Parameters, then buffers, then children: the order the public views list them in.
        for (const auto& [name, p] : m.named_parameters("", false))
          attrs.push_back(json{{"name", name}, {"parameter", tensor(p)}});
        for (const auto& [name, b] : m.named_buffers("", false))
          attrs.push_back(json{{"name", name}, {"buffer", tensor(b)}});
        for (const child_edge& e : edges.at(&m))
          attrs.push_back(json{{"name", e.name}, {e.alias ? "alias" : "module", index_of.at(e.child)}});
        j["attrs"] = std::move(attrs);
        json graphs = json::array();
        for (const auto& [sig, g] : tm->graphs()) graphs.push_back(graph_json(sig, *g));
        j["graphs"] = std::move(graphs);
      } else {
        const nn::builtin_entry* b = nn::builtin_registry::instance().find(m.type_name());
        if (b == nullptr || !m.is_builtin())
          throw format_error("save: module " + std::to_string(i) + " of type " + std::string(m.type_name()) +
                             " is neither a TracedModule nor a registered builtin module");
        j["kind"] = "builtin";
        j["config"] = value(b->config(m));
        json ts = json::array();
        for (const auto& [name, t] : m.named_tensors()) ts.push_back(json::array({name, tensor(t)}));
        j["tensors"] = std::move(ts);
      }
      list.push_back(std::move(j));
    }
    doc["modules"] = std::move(list);
  }

  /// Header, JSON and blobs, handed in pieces to `put(const void*, std::size_t)`.
  template <class Put>
  void write(Put&& put) {
    json blobs = json::array();
    std::size_t offset = 0;
    std::vector<std::size_t> offsets;
    for (const Blob& b : blobs_) {
      offsets.push_back(offset);
      blobs.push_back(json{{"offset", offset}, {"nbytes", b.nbytes}, {"crc32c", crc32c(std::span(b.data, b.nbytes))}});
      offset = align_up(offset + b.nbytes);
    }
    doc["format"] = "tracemod";
    doc["blobs"] = std::move(blobs);
    doc["tensors"] = std::move(tensors_);
    const std::string text = doc.dump();
    header h;
    h.json_size = text.size();
    h.json_crc = crc32c(std::as_bytes(std::span(text.data(), text.size())));
    h.data_offset = align_up(header_size + text.size());
    h.data_size = offset;
    const auto head = h.encode();
    put(head.data(), head.size());
    put(text.data(), text.size());
    static constexpr std::array<char, blob_alignment> zeros{};
    put(zeros.data(), h.data_offset - header_size - text.size());
    for (std::size_t i = 0; i < blobs_.size(); ++i) {
      put(blobs_[i].data, blobs_[i].nbytes);
      const std::size_t end = offsets[i] + blobs_[i].nbytes;
      const std::size_t pad = (i + 1 < blobs_.size() ? offsets[i + 1] : offset) - end;
      if (pad > 0) put(zeros.data(), pad);
    }
  }

 private:
  struct Blob {
    const std::byte* data;
    std::size_t nbytes;
  };
  static const std::byte* bytes_of(const Tensor& t) {
    return visit_dtype(t.dtype(), [&]<class T>(T) { return reinterpret_cast<const std::byte*>(t.data<T>()); });
  }
  std::vector<Blob> blobs_;
  std::unordered_map<const void*, std::size_t> blob_of_;
  json tensors_ = json::array();
};

}  // namespace io::detail

/// Writes `module` (a traced module and everything it holds) to a stream in tracemod's format.
/// Throws format_error naming a module that cannot be saved (a non-builtin module that is no
/// TracedModule, a builtin type missing from nn::builtin_registry).
inline void save(const TracedModule& module, std::ostream& os) {
  io::detail::Writer w;
  w.modules(module);
  w.write([&](const void* p, std::size_t n) { os.write(static_cast<const char*>(p), static_cast<std::streamsize>(n)); });
  if (!os) throw format_error("save: writing the stream failed");
}

/// Writes `module` to a file, replacing it atomically if it exists (io/atomic_file.hpp): a save
/// that fails leaves the old file as it was, and saving over the file the module was loaded from
/// is safe. Throws format_error naming the path for a folder that is missing or not writable, a
/// path that is a directory, or a failed write.
inline void save(const TracedModule& module, const std::filesystem::path& path) {
  io::detail::Writer w;
  w.modules(module);
  io::write_file_atomically(path, "save", [&](io::AtomicFile& f) { w.write([&](const void* p, std::size_t n) { f.write(p, n); }); });
}

}  // namespace tracemod
