// Recording into a runtime graph: the state behind tmod::Sym while trace_module or insert_exprs
// runs. A recorder knows the graph being built, its `self` node and the module whose forward runs,
// and resolves the tensors and sub-modules the forward touches to attribute paths (found by buffer
// identity and address, indexed once per module), recording a getattr right before the first expr
// that uses each attribute. Tensors that are no attribute become Constants (one per tensor).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/nn/module.hpp>
#include <tracemod/nn/module_call.hpp>

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tracemod::graph {

/// The attributes of a module, by buffer and by address, with their dotted paths.
struct AttributeIndex {
  struct TensorAttr {
    std::string path;
    Shape shape;
    DType dtype;
  };
  std::unordered_map<const void*, TensorAttr> tensors;
  std::unordered_map<const Module*, std::string> modules;

  explicit AttributeIndex(const Module& m) {
    for (const auto& [path, t] : m.named_tensors()) tensors.emplace(t.storage_id(), TensorAttr{path, t.shape(), t.dtype()});
    for (const auto& [path, child] : m.named_modules())
      if (!path.empty()) modules.emplace(&child, path);
  }
};

/// What trace_module provides to the recorder for calls of user modules: where their graphs go.
class ModuleTracer {
 public:
  /// The graph already recorded for `module` called with `signature`, or null.
  virtual Graph* find_graph(const Module& module, const std::string& signature) = 0;
  /// A new, empty graph for `module` called with `signature`, owned by its traced module.
  virtual Graph& add_graph(const Module& module, const std::string& signature, std::string name,
                           std::string qualname) = 0;
  /// The attribute index of a module of the traced hierarchy (built once per module).
  virtual const AttributeIndex& index_of(const Module& module) = 0;

 protected:
  ~ModuleTracer() = default;
};

class Recorder {
 public:
  /// Records into `graph`, whose `self` is `self_node`, for the forward of `module` (null: none, as
  /// in surgery on a graph whose module is not at hand). A null `index` with a tracer is asked of
  /// the tracer when a sub-module is first called (surgery scopes rarely call one).
  Recorder(Graph& graph, ModuleNode* self_node, const Module* module, ModuleTracer* tracer,
           const AttributeIndex* index)
      : graph_(graph), self_(self_node), module_(module), tracer_(tracer), index_(index) {
    stack().push_back(this);
    if (module_ != nullptr) tracemod::detail::module_calls().recording.push_back(module_);
  }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;
  /// Unlinks this recorder wherever it is in the stack: scopes held in optionals or containers may
  /// end in any order, and no entry may outlive its recorder.
  ~Recorder() {
    auto& s = stack();
    if (const auto it = std::find(s.rbegin(), s.rend(), this); it != s.rend()) s.erase(std::next(it).base());
    if (module_ == nullptr) return;
    auto& owners = tracemod::detail::module_calls().recording;
    if (const auto it = std::find(owners.rbegin(), owners.rend(), module_); it != owners.rend())
      owners.erase(std::next(it).base());
  }

  /// The innermost recorder; throws graph_error naming `what` when nothing records.
  static Recorder& current(std::string_view what) {
    if (stack().empty())
      throw graph_error(std::string(what) +
                        ": a tmod::Sym can only be used while tmod::trace_module or Graph::insert_exprs records");
    return *stack().back();
  }
  [[nodiscard]] static bool active() { return !stack().empty(); }
  /// Whether a recorder of this thread records into `g`.
  [[nodiscard]] static bool records_into(const Graph& g) {
    return std::any_of(stack().begin(), stack().end(), [&](const Recorder* r) { return &r->graph_ == &g; });
  }

  [[nodiscard]] Graph& graph() const noexcept { return graph_; }
  [[nodiscard]] ModuleNode* self_node() const noexcept { return self_; }
  [[nodiscard]] const Module* module() const noexcept { return module_; }
  [[nodiscard]] ModuleTracer* tracer() const noexcept { return tracer_; }

  /// The node for a tensor argument: a getattr of the attribute it is (recorded on first use), or a
  /// Constant.
  Node* tensor_node(const Tensor& t) {
    if (!t.defined()) throw value_error(graph_.name() + ".Graph: an undefined tensor cannot enter a graph");
    if (index_ != nullptr) {
      const auto it = index_->tensors.find(t.storage_id());
      if (it != index_->tensors.end() && it->second.shape == t.shape() && it->second.dtype == t.dtype())
        return attr_tensor(it->second.path, t);
    }
    const auto key = std::make_pair(t.storage_id(), t.shape().to_string());
    for (const auto& [k, n] : constants_)
      if (k == key) return n;
    Node* n = graph_.create_constant(t);
    constants_.emplace_back(key, n);
    return n;
  }

  /// The getattr node of a tensor attribute path (recorded on first use).
  Node* attr_tensor(const std::string& path, const Tensor& t) {
    if (const auto it = getattrs_.find(path); it != getattrs_.end()) return it->second;
    Node* n = graph_.create_get_attr_tensor(self_, path, t.shape(), t.dtype(), path);
    getattrs_.emplace(path, n);
    return n;
  }

  /// The getattr node of a sub-module (recorded on first use); throws if it is no attribute.
  ModuleNode* module_node(const Module& m) {
    std::string path;
    if (index_ == nullptr && tracer_ != nullptr && module_ != nullptr) index_ = &tracer_->index_of(*module_);
    if (index_ != nullptr)
      if (const auto it = index_->modules.find(&m); it != index_->modules.end()) path = it->second;
    if (path.empty())
      throw graph_error(graph_.name() + ".Graph: a " + std::string(m.type_name()) +
                        " module called in forward is not an attribute of the traced module; make it a member "
                        "listed in TM_MODULE (or add it with setattr)");
    return attr_module(path, m.is_builtin() ? std::string(m.type_name()) : std::string("Module"));
  }

  ModuleNode* attr_module(const std::string& path, const std::string& module_type) {
    if (const auto it = getattrs_.find(path); it != getattrs_.end()) return static_cast<ModuleNode*>(it->second);
    ModuleNode* n = graph_.create_get_attr_module(self_, path, module_type, path);
    getattrs_.emplace(path, n);
    return n;
  }

  /// Remembers a getattr node created elsewhere (surgery seeds the recorder with existing ones).
  void seed_getattr(const std::string& path, Node* n) { getattrs_.emplace(path, n); }

 private:
  static std::vector<Recorder*>& stack() {
    thread_local std::vector<Recorder*> s;
    return s;
  }

  Graph& graph_;
  ModuleNode* self_;
  const Module* module_;
  ModuleTracer* tracer_;
  const AttributeIndex* index_;
  std::unordered_map<std::string, Node*> getattrs_;
  std::vector<std::pair<std::pair<const void*, std::string>, Node*>> constants_;
};

}  // namespace tracemod::graph
