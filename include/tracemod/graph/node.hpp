// Nodes of the runtime graph (MegEngine's Node, TensorNode, ModuleNode): values that exprs produce
// and consume. A node is owned by the expr that produces it (graph inputs by their Input expr) and
// knows its users, in insertion order, once per use.
#pragma once

#include <tracemod/core/dim.hpp>
#include <tracemod/core/dtype.hpp>
#include <tracemod/core/qparams.hpp>
#include <tracemod/core/shape.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tracemod {
class Module;
}

namespace tracemod::graph {

class Expr;
class Graph;

class Node {
 public:
  enum class Kind : std::uint8_t { tensor, module };

  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  virtual ~Node() = default;

  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  [[nodiscard]] bool is_tensor() const noexcept { return kind_ == Kind::tensor; }
  /// Global id, unique across the whole traced module hierarchy.
  [[nodiscard]] std::int64_t id() const noexcept { return id_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// The dotted path of the value ("ResNet.layer1.[out]", "SimpleModule.[method_add]").
  [[nodiscard]] const std::string& qualname() const noexcept { return qualname_; }
  /// The expr that produces this node (an Input expr for graph inputs).
  [[nodiscard]] Expr* expr() const noexcept { return expr_; }
  /// The exprs that consume this node, once per use, in the order the uses were made.
  [[nodiscard]] const std::vector<Expr*>& users() const noexcept { return users_; }
  /// The graph this node belongs to.
  [[nodiscard]] Graph* top_graph() const noexcept { return graph_; }

  /// Renames the node within its graph's namespace; throws graph_error if the name is taken.
  void set_name(const std::string& name);
  /// Sets the qualname (informative only: loading restores the saved one).
  void set_qualname(std::string qualname) { qualname_ = std::move(qualname); }

 protected:
  Node(Kind k, Graph* g, std::string name) : kind_(k), graph_(g), name_(std::move(name)) {}

 private:
  friend class Expr;
  friend class Graph;
  friend class ModuleNode;
  friend class TensorNode;
  friend class IdAllocator;

  Kind kind_;
  Graph* graph_;
  std::string name_;
  std::string qualname_;
  Expr* expr_ = nullptr;
  std::vector<Expr*> users_;
  std::int64_t id_ = -1;
};

/// A tensor value: its shape, dtype and quantization parameters as recorded at trace time
/// (metadata: the interpreter checks graph inputs against them). A graph traced with dynamic
/// dimensions also keeps each tensor's symbolic dims (core/dim.hpp): shape() stays the example
/// shape of the trace, dims() says how each extent follows from the inputs' symbols.
class TensorNode final : public Node {
 public:
  TensorNode(Graph* g, std::string name, Shape shape, DType dtype)
      : Node(Kind::tensor, g, std::move(name)), shape_(shape), dtype_(dtype) {}

  [[nodiscard]] const Shape& shape() const noexcept { return shape_; }
  [[nodiscard]] DType dtype() const noexcept { return dtype_; }
  [[nodiscard]] const std::optional<QParams>& qparams() const noexcept { return qparams_; }
  void set_shape(const Shape& s) { shape_ = s; }
  void set_dtype(DType d) { dtype_ = d; }
  void set_qparams(std::optional<QParams> q) { qparams_ = std::move(q); }

  /// One expression per axis: the constants of shape() unless the node is dynamic.
  [[nodiscard]] Dims dims() const { return dims_ ? *dims_ : to_dims(shape_); }
  /// Whether some axis is symbolic.
  [[nodiscard]] bool is_dynamic() const noexcept { return dims_ != nullptr; }
  /// Sets the symbolic dims (all-constant dims make the node static again) and drops the graph's
  /// execution plan; throws shape_error when the rank differs from shape()'s. (graph/edit.hpp)
  void set_dims(const Dims& d);
  /// The symbolic shape when dynamic, else the shape: "(batch, 64, H, W)".
  [[nodiscard]] std::string shape_text() const { return dims_ ? to_string(*dims_) : shape_.to_string(); }

  /// The value of an int32 tensor of rank 0 or 1 computed from shapes (F::shape_of and what is
  /// built from it) or held by a small Constant; null when the value is not known until a run.
  [[nodiscard]] const ShapeValue* value() const noexcept { return value_.get(); }
  void set_value(std::optional<ShapeValue> v) {
    value_ = v ? std::make_shared<const ShapeValue>(std::move(*v)) : nullptr;
  }
  /// Takes `from`'s symbolic dims and value: a node standing for it in another graph (a callee's
  /// input, a call's output, a copy).
  void copy_symbolic(const TensorNode& from) {
    if (from.is_dynamic()) set_dims(from.dims());
    if (from.value() != nullptr) set_value(*from.value());
  }
  /// As symbolic shape inference sees the node (core/dim.hpp).
  [[nodiscard]] ShapeDims shape_dims() const { return {dims(), shape_, value_.get()}; }

 private:
  std::shared_ptr<const Dims> dims_;  // null: static
  std::shared_ptr<const ShapeValue> value_;  // null: not known before a run
  Shape shape_;
  DType dtype_;
  std::optional<QParams> qparams_;
};

/// A module value: `self`, or a sub-module reached by getattr.
class ModuleNode final : public Node {
 public:
  ModuleNode(Graph* g, std::string name, std::string module_type)
      : Node(Kind::module, g, std::move(name)), module_type_(std::move(module_type)) {}

  /// The builtin class name ("Conv2d"), or "Module" for user modules (traced through).
  [[nodiscard]] const std::string& module_type() const noexcept { return module_type_; }
  /// The live module this node stands for in the traced module that owns the graph, or nullptr
  /// when it cannot be resolved (an attribute removed since).
  [[nodiscard]] Module* owner() const;

 private:
  std::string module_type_;
};

}  // namespace tracemod::graph
