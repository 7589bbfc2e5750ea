// The TracedModule under construction during import: ONNX value names resolved to graph nodes,
// initializers made attributes (read through getattr right before their first use), constant
// tensors read at import time (shapes, clip bounds), and op calls recorded through the op registry.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/nn/parameter.hpp>
#include <tracemod/onnx/proto.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tracemod::onnx {

/// Options of import_model. tracemod graphs have static shapes: symbolic dimensions take a value.
struct ImportOptions {
  /// Values of symbolic dimensions by name ({"batch", 8}).
  std::map<std::string, std::int64_t> dims{};
  /// The value of a symbolic dimension not in `dims`.
  std::int64_t default_dim = 1;
  /// Keep the inputs' symbolic dimensions: each input axis with a dim_param becomes that symbol of
  /// the imported graph (docs/traced-module.md, "Dynamic shapes"), which then runs at any extent
  /// there; `dims` / `default_dim` give the example extents. Off: the graph is static.
  bool dynamic_dims = false;
  /// Graph inputs that are fixed at import time (e.g. a Reshape's shape fed as an input); see
  /// constant_input_names.
  std::map<std::string, proto::TensorProto> constant_inputs{};
};

namespace detail {

/// A feature of a model tracemod cannot represent; import collects them all, then reports them at once.
class unsupported : public value_error {
 public:
  using value_error::value_error;
};

class Importer {
 public:
  Importer(TracedModule& tm, graph::Graph& g, std::int64_t opset) : tm_(tm), g_(g), opset_(opset) {
    self_ = g.inputs().front();
  }

  [[nodiscard]] std::int64_t opset() const noexcept { return opset_; }
  [[nodiscard]] graph::Graph& graph() noexcept { return g_; }

  /// An initializer, a Constant node's value, or a bound input: read at import time or, when used
  /// as a tensor, turned into an attribute (initializers) or a Constant expr.
  void add_static(const std::string& name, const proto::TensorProto& t, bool initializer) {
    statics_[name] = {&t, initializer};
  }
  [[nodiscard]] bool is_static(const std::string& name) const { return statics_.count(name) != 0; }
  [[nodiscard]] bool is_initializer(const std::string& name) const {
    const auto st = statics_.find(name);
    return st != statics_.end() && st->second.second;
  }
  /// A value computed at import time (fold.hpp): kept by the importer, then static like a Constant.
  void add_folded(const std::string& name, proto::TensorProto t) {
    folded_.push_back(std::move(t));
    add_static(name, folded_.back(), false);
  }
  /// The TensorProto of a static value, or nullptr.
  [[nodiscard]] const proto::TensorProto* static_proto(const std::string& name) const {
    const auto st = statics_.find(name);
    return st == statics_.end() ? nullptr : st->second.first;
  }
  /// The tensor node an ONNX value is bound to, or nullptr (a static value, or none).
  [[nodiscard]] const graph::TensorNode* bound_tensor(const std::string& name) const {
    const auto it = nodes_.find(name);
    return it == nodes_.end() || !it->second->is_tensor() ? nullptr : static_cast<const graph::TensorNode*>(it->second);
  }

  void bind(const std::string& name, graph::Node* n, bool rename = true) {
    if (name.empty()) return;  // an optional output left out
    if (rename) g_.rename_unique(n, name);
    nodes_[name] = n;
  }
  [[nodiscard]] bool known(const std::string& name) const { return nodes_.count(name) != 0 || is_static(name); }

  /// The tensor node of an ONNX value.
  graph::Node* tensor(const std::string& name) {
    if (const auto it = nodes_.find(name); it != nodes_.end()) return it->second;
    const auto st = statics_.find(name);
    if (st == statics_.end()) throw unsupported("value '" + name + "' is produced by no node, input or initializer");
    const Tensor t = tensor_of(*st->second.first, "tensor '" + name + "'");
    graph::Node* n;
    // A few integers (a shape's pieces) are a Constant, whose value shape inference reads.
    const bool shape_piece = t.dtype() == DType::int32 && t.shape().rank() <= 1 && t.numel() <= static_cast<std::int64_t>(Shape::max_rank);
    if (st->second.second && !shape_piece) {
      std::string attr = graph::NameSpace::sanitize(name);
      for (int i = 1; tm_.has_attr(attr); ++i) attr = graph::NameSpace::sanitize(name) + "_" + std::to_string(i);
      tm_.setattr(attr, Parameter(t));
      n = g_.create_get_attr_tensor(self_, attr, t.shape(), t.dtype(), attr);
    } else {
      n = g_.create_constant(t, name);
    }
    nodes_[name] = n;
    return n;
  }
  /// A static value as a tensor: from_proto, except that an INT64 one (a shape, an index) is int32,
  /// the type tracemod computes shapes in, when its numbers fit (unsupported otherwise).
  static Tensor tensor_of(const proto::TensorProto& p, const std::string& where) {
    if (p.data_type() != proto::TensorProto::INT64) return from_proto(p, where);
    const std::vector<std::int64_t> v = integers_of(p, where);
    Tensor t = Tensor::empty(shape_of(p, where), DType::int32, where);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i] < std::numeric_limits<std::int32_t>::min() || v[i] > std::numeric_limits<std::int32_t>::max())
        throw unsupported(where + ": INT64 value " + std::to_string(v[i]) + " (tracemod computes integers in int32)");
      t.data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
    }
    return t;
  }
  /// Input `i` of node `n` as a tensor node, or None when absent (an empty name).
  graph::CallArg optional(const proto::NodeProto& n, int i) {
    if (i >= n.input_size() || n.input(i).empty()) return Value(none);
    return tensor(n.input(i));
  }
  /// The numbers of a value known at import time; `unsupported` otherwise.
  std::vector<double> numbers(const proto::NodeProto& n, int i, std::string_view what) {
    return numbers_of(static_value(n, i, what), what);
  }
  /// The integers (a shape, axes) of a value known at import time; `unsupported` otherwise.
  std::vector<std::int64_t> integers(const proto::NodeProto& n, int i, std::string_view what) {
    return integers_of(static_value(n, i, what), what);
  }

  /// The shape of a value known at import time; `unsupported` otherwise.
  Shape static_shape(const proto::NodeProto& n, int i, std::string_view what) {
    return shape_of(static_value(n, i, what), what);
  }

  [[nodiscard]] static const Shape& shape(const graph::Node* n) { return static_cast<const graph::TensorNode*>(n)->shape(); }

  /// Records a call of `op` with operands and params in canonical order; returns its output node.
  /// An int32 or bool tensor into an op that computes in float32 is refused here, naming the op.
  graph::Node* call(const functional::op_entry& op, const std::vector<graph::CallArg>& operands,
                    const std::vector<Value>& params) {
    const std::array int32_in{DType::int32};
    const bool float32_only = [&] {
      try {
        return op.infer_dtype(nullptr, int32_in) == DType::float32;
      } catch (const dtype_error&) {  // an op that refuses int32 while recording
        return true;
      }
    }();
    if (float32_only)
      for (const graph::CallArg& a : operands) {
        std::vector<graph::Node*> nodes;
        if (const auto* n = std::get_if<graph::Node*>(&a)) nodes.push_back(*n);
        if (const auto* l = std::get_if<std::vector<graph::Node*>>(&a)) nodes = *l;
        for (const graph::Node* n : nodes)
          if (n->is_tensor() && static_cast<const graph::TensorNode*>(n)->dtype() != DType::float32)
            throw unsupported("element type " +
                              elem_type_name(elem_type_of(static_cast<const graph::TensorNode*>(n)->dtype())) +
                              " into " + op.target + " (the op computes in float32)");
      }
    return g_.create_op_call(op, operands, params)->output();
  }

 private:
  const proto::TensorProto& static_value(const proto::NodeProto& n, int i, std::string_view what) const {
    const std::string& name = n.input(i);
    const auto st = statics_.find(name);
    if (st == statics_.end())
      throw unsupported(std::string(what) + " '" + name +
                        "' is computed at run time; tracemod needs it at import time (an initializer, a Constant, or "
                        "ImportOptions::constant_inputs)");
    return *st->second.first;
  }

  TracedModule& tm_;
  graph::Graph& g_;
  std::int64_t opset_;
  graph::Node* self_;
  std::unordered_map<std::string, graph::Node*> nodes_;
  std::unordered_map<std::string, std::pair<const proto::TensorProto*, bool>> statics_;
  std::deque<proto::TensorProto> folded_;  // stable addresses for statics_
};

}  // namespace detail
}  // namespace tracemod::onnx
