// The ONNX graph under construction during export: unique value names, nodes, initializers (module
// weights once per attribute path, numeric constants once per value), and the operands of one call
// as the export table sees them.
#pragma once

#include <tracemod/core/dtype.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/onnx/proto.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tracemod::onnx {

/// Options of export_model.
struct ExportOptions {
  /// The ai.onnx opset the model declares (13 to 17: every mapped op has the same meaning there).
  std::int64_t opset = 13;
  /// The first axis of every input (and of every output that has the traced batch size there) is
  /// written as the symbolic dimension "batch", so a serving engine accepts any batch size. A
  /// module traced with dynamic dims writes its own instead: each symbolic axis of an input or
  /// output is a dim_param, its expression as DimExpr prints it ("N", "(H-1)/32+1").
  bool dynamic_batch = true;
};

namespace detail {

/// An operand of a call being exported, and one call (its operands, output name and shape, and how
/// messages name it): the rules' own types.
using Operand = functional::onnx_operand;
using Call = functional::onnx_call;

class Emitter {
 public:
  Emitter(proto::GraphProto& g, const ExportOptions& options) : graph_(g), options_(options) {}

  [[nodiscard]] const ExportOptions& options() const noexcept { return options_; }

  /// Reserves a name that some value will carry (graph inputs and tracemod's node names).
  void reserve(const std::string& name) { used_.insert(name); }
  /// A value name based on `base`, unique in the model.
  [[nodiscard]] std::string fresh(std::string_view base) {
    std::string name(base);
    for (int i = 1; used_.count(name) != 0; ++i) name = std::string(base) + "_" + std::to_string(i);
    used_.insert(name);
    return name;
  }

  proto::NodeProto& node(const std::string& op_type, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs) {
    proto::NodeProto& n = *graph_.add_node();
    n.set_op_type(op_type);
    n.set_name(op_type + "_" + std::to_string(graph_.node_size()));
    for (const std::string& i : inputs) n.add_input(i);
    for (const std::string& o : outputs) n.add_output(o);
    return n;
  }
  /// A node with one output named by `out`; returns that name.
  std::string node1(const std::string& op_type, const std::vector<std::string>& inputs, const std::string& out) {
    node(op_type, inputs, {out});
    return out;
  }

  /// A tensor as an initializer, named after `base`.
  std::string initializer(const Tensor& t, std::string_view base) {
    const std::string name = fresh(base);
    to_proto(t, name, *graph_.add_initializer());
    return name;
  }
  /// A module's tensor, written once however often the module is called.
  std::string weight(const Tensor& t, const std::string& path) {
    const auto it = weights_.find(path);
    if (it != weights_.end()) return it->second;
    return weights_[path] = initializer(t, path);
  }
  /// A float32 scalar constant (rank 0), written once per value.
  std::string scalar(double v) {
    const auto it = scalars_.find(v);
    if (it != scalars_.end()) return it->second;
    Tensor t = Tensor::empty(Shape{}, DType::float32, "onnx export");
    t.data<float>()[0] = static_cast<float>(v);
    return scalars_[v] = initializer(t, "const_scalar");
  }
  /// A float32 vector of n copies of v (batch norm's missing scale or shift).
  std::string filled(double v, std::int64_t n) {
    Tensor t = Tensor::empty(Shape{n}, DType::float32, "onnx export");
    for (std::int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(v);
    return initializer(t, "const_fill");
  }
  /// An int64 vector (Reshape's shape).
  std::string ints(const std::vector<std::int64_t>& v, std::string_view base) {
    const std::string name = fresh(base);
    proto::TensorProto& t = *graph_.add_initializer();
    t.set_name(name);
    t.set_data_type(proto::TensorProto::INT64);
    t.add_dims(static_cast<std::int64_t>(v.size()));
    for (std::int64_t x : v) t.add_int64_data(x);
    return name;
  }
  /// A rank-0 int8 or uint8 constant (QuantizeLinear's zero point).
  std::string zero_point(std::int64_t v, bool is_unsigned) {
    const std::string name = fresh("zero_point");
    proto::TensorProto& t = *graph_.add_initializer();
    t.set_name(name);
    t.set_data_type(is_unsigned ? proto::TensorProto::UINT8 : proto::TensorProto::INT8);
    t.add_int32_data(static_cast<std::int32_t>(v));  // ONNX stores 8-bit integers in int32_data
    return name;
  }
  /// The ONNX value of a tensor or number operand.
  std::string value(const Operand& o) { return o.kind == Operand::Kind::scalar ? scalar(o.scalar) : o.name; }

 private:
  proto::GraphProto& graph_;
  const ExportOptions& options_;
  std::unordered_set<std::string> used_;
  std::unordered_map<std::string, std::string> weights_;
  std::map<double, std::string> scalars_;
};

}  // namespace detail
}  // namespace tracemod::onnx
