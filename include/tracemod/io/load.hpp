// tmod::load: rebuilds a TracedModule from tracemod's file format (docs/file-format.md), validating
// everything it reads: every malformed, truncated, corrupted or hostile input raises format_error
// naming what is wrong and where. Graphs are rebuilt through Graph's construction API (so a file
// cannot build an inconsistent graph), then names and ids are restored and graph::check runs.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/storage.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/graph/check.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/io/crc32c.hpp>
#include <tracemod/io/format.hpp>
#include <tracemod/io/load_checks.hpp>
#include <tracemod/io/load_fields.hpp>
#include <tracemod/io/loaders.hpp>
#include <tracemod/io/mapped_file.hpp>
#include <tracemod/nn/builtin_registry.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tracemod {

/// Options of load.
struct LoadOptions {
  /// Verify every tensor blob's CRC32C (the header and JSON checksums are always verified). Turning
  /// it off makes load touch no weight page; corrupted weights then go unnoticed.
  bool verify_tensor_checksums = true;
};

namespace io::detail {

class Reader : json_fields {
 public:
  Reader(std::span<const std::byte> file, std::shared_ptr<MappedFile> map, const LoadOptions& options)
      : file_(file), map_(std::move(map)), options_(options) {}

  TracedModule read() {
    try {
      parse_header();
      read_blobs();
      read_tensors();
      return read_modules();
    } catch (const format_error&) {
      throw;
    } catch (const json::exception& e) {
      throw format_error("load: " + where_ + ": malformed description: " + e.what());
    } catch (const error& e) {
      throw format_error("load: " + where_ + ": " + e.what());
    } catch (const std::bad_alloc&) {
      throw format_error("load: " + where_ + ": out of memory");
    }
  }

 private:
  // ---- header, blobs, tensors ------------------------------------------------------------------------
  void parse_header() {
    where_ = "header";
    if (file_.size() < header_size) fail("the file has " + std::to_string(file_.size()) + " bytes, less than a header");
    if (std::memcmp(file_.data(), file_magic.data(), file_magic.size()) != 0) fail("not a tracemod file (bad magic)");
    const auto get = [&]<class T>(std::size_t at, T) {
      T v;
      std::memcpy(&v, file_.data() + at, sizeof v);
      return v;
    };
    if (get(12, std::uint32_t{}) != byte_order_mark) fail("the file's byte order differs from this machine's");
    if (get(60, std::uint32_t{}) != crc32c(file_.first(60))) fail("header checksum mismatch (the file is corrupted)");
    if (get(56, std::uint32_t{}) != 0) fail("reserved bytes 56 to 59 are not zero");
    version_ = get(8, std::uint32_t{});
    if (version_ < 1 || version_ > format_version)
      fail("format version " + std::to_string(version_) + " is not supported (this library reads 1 to " +
           std::to_string(format_version) + ")");
    const auto json_offset = get(24, std::uint64_t{});
    const auto json_size = get(32, std::uint64_t{});
    data_offset_ = get(40, std::uint64_t{});
    data_size_ = get(48, std::uint64_t{});
    const std::uint64_t size = file_.size();
    if (json_offset != header_size || json_size > size - header_size)
      fail("the description (" + std::to_string(json_size) + " bytes at " + std::to_string(json_offset) +
           ") lies past the end of the file (" + std::to_string(size) + " bytes)");
    if (data_offset_ % blob_alignment != 0 || data_offset_ < header_size + json_size || data_offset_ > size ||
        data_size_ > size - data_offset_)
      fail("the tensor data (" + std::to_string(data_size_) + " bytes at " + std::to_string(data_offset_) +
           ") does not fit the file (" + std::to_string(size) + " bytes)");
    const auto text = file_.subspan(header_size, json_size);
    where_ = "description";
    if (get(20, std::uint32_t{}) != crc32c(text)) fail("checksum mismatch (the file is corrupted)");
    const auto* c = reinterpret_cast<const char*>(text.data());
    doc_ = json::parse(c, c + text.size());
    if (!doc_.is_object() || string(doc_, "format") != "tracemod") fail("not a tracemod description");
  }

  void read_blobs() {
    const json& blobs = array(doc_, "blobs");
    for (std::size_t i = 0; i < blobs.size(); ++i) {
      where_ = "blob " + std::to_string(i);
      const std::int64_t off = integer(blobs[i], "offset");
      const std::int64_t n = integer(blobs[i], "nbytes");
      if (off < 0 || n < 0 || static_cast<std::uint64_t>(off) % blob_alignment != 0 ||
          static_cast<std::uint64_t>(off) > data_size_ || static_cast<std::uint64_t>(n) > data_size_ - static_cast<std::uint64_t>(off))
        fail(std::to_string(n) + " bytes at offset " + std::to_string(off) + " lie past the end of the data (" +
             std::to_string(data_size_) + " bytes)");
      const auto bytes = file_.subspan(static_cast<std::size_t>(data_offset_ + static_cast<std::uint64_t>(off)),
                                       static_cast<std::size_t>(n));
      if (options_.verify_tensor_checksums && integer(blobs[i], "crc32c") != crc32c_parallel(bytes))
        fail("checksum mismatch (the tensor bytes are corrupted)");
      if (map_) {
        auto* p = map_->data() + (bytes.data() - map_->data());
        blobs_.push_back(std::make_shared<Storage>(p, bytes.size(), map_));
      } else {
        auto s = std::make_shared<Storage>(bytes.size());
        if (!bytes.empty()) std::memcpy(s->data(), bytes.data(), bytes.size());
        blobs_.push_back(std::move(s));
      }
    }
  }

  void read_tensors() {
    const json& ts = array(doc_, "tensors");
    for (std::size_t i = 0; i < ts.size(); ++i) {
      where_ = "tensor " + std::to_string(i);
      const std::size_t b = index(ts[i], "blob", blobs_.size(), "blob");
      const DType dt = dtype(ts[i]);
      const Shape s = shape(ts[i], dt);
      if (static_cast<std::size_t>(s.numel()) * itemsize(dt) > blobs_[b]->bytes())
        fail("shape " + s.to_string() + " " + std::string(dtype_name(dt)) + " needs more bytes than blob " + std::to_string(b) +
             " holds (" + std::to_string(blobs_[b]->bytes()) + ")");
      if (dt == DType::boolean) {  // a byte other than 0 or 1 is no bool
        const std::byte* p = blobs_[b]->data();
        for (std::int64_t k = 0; k < s.numel(); ++k)
          if (std::to_integer<unsigned>(p[k]) > 1)
            fail("bool element " + std::to_string(k) + " is the byte " + std::to_string(std::to_integer<unsigned>(p[k])) +
                 ", neither 0 nor 1");
      }
      Tensor t = Tensor::from_storage(blobs_[b], s, dt);
      t.set_qparams(qparams(ts[i]));
      if (read_only(ts[i])) t.make_read_only();
      tensors_.push_back(std::move(t));
    }
  }

  /// A tensor entry's optional "read_only" flag: its buffer was read-only when saved (the weights an
  /// optimized module keeps, which kernels may then use in a prepared form), and is again on load.
  bool read_only(const json& entry) {
    if (!entry.contains("read_only")) return false;
    if (!entry["read_only"].is_boolean()) fail("\"read_only\" must be true or false");
    return entry["read_only"].get<bool>();
  }

  const Tensor& tensor_at(const json& j, const char* key) const { return tensors_[index(j, key, tensors_.size(), "tensor")]; }

  // ---- modules ---------------------------------------------------------------------------------------
  /// The module tree as it is built, children before parents (children have larger indices).
  struct module_tree {
    const json& ms;
    std::vector<std::shared_ptr<Module>> built;  ///< shared: an alias attribute holds the module too
    std::vector<bool> claimed;
    std::vector<TracedModule*> traced;
    std::vector<std::string> paths;  ///< attribute paths for messages ("layer1.0.conv1")
  };

  TracedModule read_modules() {
    const json& ms = array(doc_, "modules");
    if (ms.empty()) fail("the file holds no module");
    module_tree tree{ms, decltype(module_tree::built)(ms.size()), std::vector<bool>(ms.size(), false), {}, attribute_paths(ms)};
    for (std::size_t i = ms.size(); i-- > 0;) {  // from the leaves up
      where_ = "module " + std::to_string(i);
      json storage;  // a description the loaders upgraded
      const json& j = upgraded(ms[i], storage);
      const std::string type = string(j, "type");
      where_ += " (" + type + ")";
      const std::string kind = string(j, "kind");
      if (kind != "traced" && kind != "builtin") fail("unknown module kind '" + kind + "'");
      tree.built[i] = kind == "traced" ? read_traced_module(j, type, i, tree) : read_builtin_module(j, type, tree.paths[i]);
    }
    return finish_tree(tree);
  }

  /// Attribute paths of the modules, parents first; a malformed tree is reported where it is checked.
  static std::vector<std::string> attribute_paths(const json& ms) {
    std::vector<std::string> paths(ms.size());
    for (std::size_t i = 0; i < ms.size(); ++i) {
      if (!ms[i].is_object() || !ms[i].contains("attrs") || !ms[i]["attrs"].is_array()) continue;
      for (const json& a : ms[i]["attrs"])
        if (a.is_object() && a.contains("module") && a["module"].is_number_unsigned() && a.contains("name") &&
            a["name"].is_string()) {
          const auto c = a["module"].get<std::uint64_t>();
          if (c > i && c < ms.size()) paths[c] = (paths[i].empty() ? "" : paths[i] + ".") + a["name"].get<std::string>();
        }
    }
    return paths;
  }

  /// A module's description as this version reads it: the registered loaders of its type applied to
  /// a copy in `storage` when there are any, else the description itself.
  const json& upgraded(const json& j, json& storage) const {
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) return j;
    const auto loaders = loader_table<module_loader>::instance().find(j["type"].get<std::string>(), version_);
    if (loaders.empty()) return j;
    storage = j;
    for (const module_loader& f : loaders) f(storage);
    return storage;
  }

  std::unique_ptr<Module> read_traced_module(const json& j, const std::string& type, std::size_t i, module_tree& tree) {
    auto tm = std::make_unique<TracedModule>(type);
    std::unordered_set<std::string> names;
    for (const json& a : array(j, "attrs")) {
      const std::string name = string(a, "name");
      if (name.empty() || name.find('.') != std::string::npos) fail("attribute name '" + name + "' is not a plain name");
      // A second attribute of one name would replace (and free) the first.
      if (!names.insert(name).second) fail("attribute '" + name + "' is defined twice");
      if (a.contains("module")) {
        const std::size_t c = index(a, "module", tree.ms.size(), "module");
        if (c <= i || tree.claimed[c]) fail("module " + std::to_string(c) + " cannot be attribute '" + name + "' (a cycle or a second parent)");
        tree.claimed[c] = true;
        tracemod::detail::module_access::add_shared_child(*tm, name, tree.built[c]);
      } else if (a.contains("alias")) {
        // Another attribute holding a module stored elsewhere in the tree. Every module attribute
        // points to a later module, so no module can end up inside itself.
        const std::size_t c = index(a, "alias", tree.ms.size(), "module");
        if (c <= i)
          fail("attribute '" + name + "' aliases module " + std::to_string(c) +
               ", which is not after module " + std::to_string(i) + " (a module cannot contain itself)");
        tracemod::detail::module_access::add_shared_child(*tm, name, tree.built[c]);
      } else if (a.contains("parameter")) {
        tm->setattr(name, Parameter(tensor_at(a, "parameter")));
      } else {
        tm->setattr(name, Buffer(tensor_at(a, "buffer")));
      }
    }
    tm->set_top(boolean(j, "top"));
    const json& ids = array(j, "total_ids");
    if (ids.size() != 2) fail("total_ids must hold 2 integers");
    if (integer(ids[0]) < 0 || integer(ids[1]) < 0) fail("total_ids " + ids.dump() + " is negative");
    tm->set_total_ids({integer(ids[0]), integer(ids[1])});
    tree.traced.push_back(tm.get());
    tracemod::detail::module_access::set_training_flag(*tm, boolean(j, "training"));
    for (const json& g : array(j, "graphs")) read_graph(*tm, g);
    return tm;
  }

  std::unique_ptr<Module> read_builtin_module(const json& j, const std::string& type, const std::string& path) {
    const nn::builtin_entry* b = nn::builtin_registry::instance().find(type);
    if (b == nullptr) fail("unknown builtin module type '" + type + "'");
    const Value config = value(field(j, "config"));
    if (const std::string why = config_integer_problem(config); !why.empty()) fail(why);
    std::unique_ptr<Module> m = b->make(config);
    m->train(boolean(j, "training"));
    const json& ts = array(j, "tensors");
    auto own = m->named_tensors();
    if (own.size() != ts.size())
      fail("the config gives " + std::to_string(own.size()) + " tensors, the file " + std::to_string(ts.size()));
    for (std::size_t k = 0; k < own.size(); ++k) {
      if (!ts[k].is_array() || ts[k].size() != 2 || ts[k][0] != own[k].first)
        fail("tensor " + std::to_string(k) + " should be '" + own[k].first + "', the file has " + ts[k].dump());
      const Tensor& t = tensors_[index(json{{"t", ts[k][1]}}, "t", tensors_.size(), "tensor")];
      if (t.dtype() != own[k].second.dtype())
        fail("module '" + path + "' (" + type + "): tensor '" + own[k].first + "' is " +
             std::string(dtype_name(t.dtype())) + ", but a " + type + "'s is " + std::string(dtype_name(own[k].second.dtype())));
      own[k].second = t;
    }
    // The saved tensors must have the shapes the config gives (a kernel would read past them).
    if (b->tensor_shapes)
      for (const auto& [name, shape] : b->tensor_shapes(*m))
        for (const auto& [own_name, own_tensor] : own)
          if (own_name == name && own_tensor.shape() != shape)
            fail("module '" + path + "' (" + type + "): tensor '" + name + "' has shape " +
                 own_tensor.shape().to_string() + ", but its config gives " + shape.to_string());
    return m;
  }

  /// Every module but the root claimed once, the root a traced module; sub-graphs linked to their
  /// parents, inserted exprs numbered, every graph checked.
  TracedModule finish_tree(module_tree& tree) {
    where_ = "module tree";
    for (std::size_t i = 1; i < tree.ms.size(); ++i)
      if (!tree.claimed[i]) fail("module " + std::to_string(i) + " is attribute of no module");
    auto* root = dynamic_cast<TracedModule*>(tree.built[0].get());
    if (root == nullptr) fail("the root module is not a traced module");
    for (TracedModule* tm : tree.traced)
      for (const auto& [sig, g] : tm->graphs())
        for (const auto& e : g->expr_list_())
          if (graph::Graph* sub = e->graph()) sub->set_parent(g.get());
    number_inserted(*root, tree.traced, inserted_);
    for (const auto& [sig, g] : root->graphs()) {
      where_ = "graph " + g->name();
      graph::check(*g);
    }
    return std::move(*root);
  }

  // ---- graphs ----------------------------------------------------------------------------------------
  using node_map = std::unordered_map<std::int64_t, graph::Node*>;

  graph::Node* node_ref(const node_map& nodes, const json& id) const {
    const std::int64_t i = integer(id);
    const auto it = nodes.find(i);
    if (it == nodes.end()) fail("node %" + std::to_string(i) + " is used before it is defined");
    return it->second;
  }

  /// Restores the saved name, qualname and id of a node the construction API just made.
  void restore(graph::Node& n, const json& j, node_map& nodes) const {
    const std::string name = string(j, "name");
    if (n.name() != name) n.set_name(name);  // graph_error if taken or invalid
    n.set_qualname(string(j, "q"));
    const std::int64_t id = integer(j, "id");
    if (!nodes.emplace(id, &n).second) fail("node id %" + std::to_string(id) + " is defined twice");
    graph::IdAllocator::assign(n, id);
    if (n.is_tensor()) static_cast<graph::TensorNode&>(n).set_qparams(qparams(j));
    if (n.is_tensor() && j.contains("dims")) restore_dims(static_cast<graph::TensorNode&>(n), j["dims"]);
    if (n.is_tensor() && j.contains("value")) restore_value(static_cast<graph::TensorNode&>(n), j["value"]);
  }

  /// The value of a node computed from shapes (core/dim.hpp): an op call's must be the one its op
  /// infers; an input's or a module call's output's is the saved one.
  void restore_value(graph::TensorNode& t, const json& a) const {
    const ShapeValue v = shape_value_from_json(a, t.shape(), where_ + ", node '" + t.name() + "'");
    if (t.dtype() != DType::int32) fail("node '" + t.name() + "' has a value but is not int32");
    if (t.expr()->op() != nullptr && (t.value() == nullptr || *t.value() != v))
      fail("node '" + t.name() + "' is saved with a value its expr does not give");
    t.set_value(v);
  }

  /// Symbolic dims of a node: an op call's must be the ones its op infers from its operands.
  void restore_dims(graph::TensorNode& t, const json& a) const {
    const Dims d = dims_from_json(a, t.shape().rank(), where_ + ", node '" + t.name() + "'");
    if (t.expr()->op() != nullptr && t.dims() != d)
      fail("node '" + t.name() + "' is saved with dims " + to_string(d) + " but its expr gives " + t.shape_text());
    t.set_dims(d);
  }

  graph::CallArg arg(const json& a, const node_map& nodes) const {
    if (a.contains("node")) return node_ref(nodes, a["node"]);
    if (a.contains("nodes")) {
      std::vector<graph::Node*> v;
      for (const json& id : array(a, "nodes")) v.push_back(node_ref(nodes, id));
      return v;
    }
    return value(field(a, "value"));
  }

  graph::NodeTree tree(const json& t, const node_map& nodes, int depth = 0) const {
    if (depth > max_nesting) fail("outputs nest deeper than " + std::to_string(max_nesting));
    if (!t.is_object() || t.size() != 1) fail("malformed output tree " + t.dump());
    const std::string& key = t.begin().key();
    const json& v = t.begin().value();
    if (key == "node") return graph::NodeTree::leaf(node_ref(nodes, v));
    if (!v.is_array()) fail("malformed output tree " + t.dump());
    if (key == "dict") {
      std::vector<std::pair<std::string, graph::NodeTree>> items;
      for (const json& kv : v) {
        if (!kv.is_array() || kv.size() != 2 || !kv[0].is_string()) fail("malformed output dict item");
        items.emplace_back(kv[0].get<std::string>(), tree(kv[1], nodes, depth + 1));
      }
      return graph::NodeTree::dict(std::move(items));
    }
    std::vector<graph::NodeTree> children;
    for (const json& c : v) children.push_back(tree(c, nodes, depth + 1));
    if (key == "tuple") return graph::NodeTree::tuple(std::move(children));
    if (key == "list") return graph::NodeTree::list(std::move(children));
    fail("unknown output tree kind '" + key + "'");
  }

  void check_output(const graph::Node& n, const json& j) const {
    if (!n.is_tensor()) return;
    const auto& t = static_cast<const graph::TensorNode&>(n);
    const DType dt = dtype(j);
    const Shape s = shape(j, dt);
    if (t.shape() != s || t.dtype() != dt)
      fail("node '" + string(j, "name") + "' is saved as " + s.to_string() + " " + std::string(dtype_name(dt)) +
           " but its expr gives " + t.shape().to_string() + " " + std::string(dtype_name(t.dtype())));
  }

  void read_graph(TracedModule& owner, const json& gj) {
    const std::string module_where = where_;
    const std::string name = string(gj, "name");
    where_ = module_where + ", graph " + name;
    graph::Graph& g = owner.add_graph(string(gj, "signature"),
                                      std::make_unique<graph::Graph>(name, string(gj, "qualname"), &owner));
    node_map nodes;
    const json& inputs = array(gj, "inputs");
    if (inputs.empty()) fail("a graph needs its self input");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const json& j = inputs[i];
      graph::Node* n;
      if (i == 0) {
        n = g.add_self_input(string(j, "module_type"));
      } else {
        const DType dt = dtype(j);
        n = g.add_tensor_input(string(j, "name"), shape(j, dt), dt);
      }
      restore(*n, j, nodes);
      graph::IdAllocator::assign(*n->expr(), integer(j, "expr"));
    }
    for (const json& saved : array(gj, "exprs")) {
      if (saved.is_object() && saved.value("kind", "") == "op" && saved.contains("target") && saved["target"].is_string()) {
        const auto loaders = loader_table<op_loader>::instance().find(saved["target"].get<std::string>(), version_);
        if (!loaders.empty()) {
          std::vector<json> exprs{saved};
          for (const op_loader& f : loaders) {
            std::vector<json> next;
            for (json& x : exprs)
              for (json& y : f(std::move(x))) next.push_back(std::move(y));
            exprs = std::move(next);
          }
          // Exprs a loader inserts get fresh ids once the whole file is read (number_inserted).
          const json saved_id = saved.value("id", json());
          for (const json& e : exprs) {
            graph::Expr* made = read_expr(g, e, nodes, module_where, name);
            if (e.value("id", json()) != saved_id) inserted_.push_back(made);
          }
          continue;
        }
      }
      read_expr(g, saved, nodes, module_where, name);
    }
    where_ = module_where + ", graph " + name + ", outputs";
    g.set_outputs(tree(field(gj, "outputs"), nodes));
    where_ = module_where;
  }

  graph::Expr* read_expr(graph::Graph& g, const json& e, node_map& nodes, const std::string& module_where,
                         const std::string& name) {
    const std::int64_t id = integer(e, "id");
    where_ = module_where + ", graph " + name + ", expr %" + std::to_string(id);
    const std::string kind = string(e, "kind");
    const json& outs = array(e, "out");
    graph::Expr* made = nullptr;
    if (kind == "get_attr") {
      if (outs.size() != 1) fail("a getattr has one output");
      graph::Node* base = node_ref(nodes, field(e, "base"));
      if (base->is_tensor()) fail("getattr of a tensor node");
      const json& o = outs[0];
      graph::Node* n;
      if (o.contains("module_type")) {
        n = g.create_get_attr_module(base, string(e, "path"), string(o, "module_type"), string(o, "name"));
      } else {
        const DType dt = dtype(o);
        n = g.create_get_attr_tensor(base, string(e, "path"), shape(o, dt), dt, string(o, "name"));
      }
      if (const std::string why = get_attr_problem(*base, n->expr()->name(), *n); !why.empty()) fail(why);
      made = n->expr();
    } else if (kind == "constant") {
      if (outs.size() != 1) fail("a constant has one output");
      made = g.create_constant(tensor_at(e, "tensor"), string(outs[0], "name"))->expr();
    } else if (kind == "op") {
      const std::string target = string(e, "target");
      const functional::op_entry* op = functional::op_registry::instance().find(target);
      if (op == nullptr) fail("unknown op '" + target + "'");
      if (outs.size() != 1) fail("an op call has one output");
      std::vector<graph::CallArg> operands;
      for (const json& a : array(e, "args")) operands.push_back(arg(a, nodes));
      std::vector<Value> params;
      for (const json& p : array(e, "params")) params.push_back(value(p));
      made = g.create_op_call(*op, operands, params);
    } else if (kind == "module_call") {
      graph::Node* callee = node_ref(nodes, field(e, "callee"));
      if (callee->is_tensor()) fail("a module call of a tensor node");
      std::vector<graph::CallArg> args;
      for (const json& a : array(e, "args")) args.push_back(arg(a, nodes));
      std::vector<std::pair<Shape, DType>> out_types;
      for (const json& o : outs) {
        const DType dt = dtype(o);
        out_types.emplace_back(shape(o, dt), dt);
      }
      made = g.create_module_call(static_cast<graph::ModuleNode*>(callee), args, string(e, "signature"), out_types);
    } else {
      fail("unknown expr kind '" + kind + "'");
    }
    if (made->output_count() != outs.size()) fail("the expr has " + std::to_string(made->output_count()) + " outputs, the file " + std::to_string(outs.size()));
    for (std::size_t k = 0; k < outs.size(); ++k) {
      check_output(*made->output(k), outs[k]);
      restore(*made->output(k), outs[k], nodes);
    }
    if (made->is_module_call())
      if (const std::string why = module_call_problem(*made); !why.empty()) fail(why);
    graph::IdAllocator::assign(*made, id);
    return made;
  }

  std::span<const std::byte> file_;
  std::shared_ptr<MappedFile> map_;
  LoadOptions options_;
  std::uint32_t version_ = 0;
  std::uint64_t data_offset_ = 0;
  std::uint64_t data_size_ = 0;
  json doc_;
  std::vector<std::shared_ptr<Storage>> blobs_;
  std::vector<graph::Expr*> inserted_;
};

}  // namespace io::detail

/// Loads a module saved by tmod::save, mapping the file copy-on-write: the tensors use the mapped
/// bytes in place. Throws format_error naming what is wrong and where for any malformed file.
[[nodiscard]] inline TracedModule load(const std::filesystem::path& path, const LoadOptions& options = {}) {
  std::shared_ptr<io::MappedFile> map = io::MappedFile::open(path);
  return io::detail::Reader(map->bytes(), map, options).read();
}

/// Loads from bytes in memory; the tensors are copied out, so `bytes` may go away afterwards.
[[nodiscard]] inline TracedModule load(std::span<const std::byte> bytes, const LoadOptions& options = {}) {
  return io::detail::Reader(bytes, nullptr, options).read();
}

}  // namespace tracemod
