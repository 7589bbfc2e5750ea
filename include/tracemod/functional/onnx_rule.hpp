// How an op or a builtin module states its ONNX equivalent, without ONNX: the rules are written
// against the two abstract contexts below, and the optional onnx component implements them over its
// protobuf graph. An op declares
//   static void onnx_export(onnx_export_context&, const params&);
//   static constexpr std::array onnx_import_types{"Relu"};   // with onnx_import_attributes and
//   static void onnx_import(onnx_import_context&);           // onnx_static_inputs when it reads any
// (or `static std::vector<onnx_import_rule> onnx_imports()` when each node type has its own
// attributes), and the op registry erases whichever of them it has; a builtin module declares
//   void onnx_export(onnx_export_context&, const std::string& path) const;
// Ops and modules without such members are refused by export and import, naming them.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/param_value.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tracemod::functional {

/// An operand of a call being exported: a value of the ONNX graph, a number, None, or a list.
struct onnx_operand {
  enum class Kind : std::uint8_t { tensor, scalar, none, list };
  Kind kind = Kind::none;
  std::string name{};  // tensor: the ONNX value name
  Shape shape{};       // tensor: its shape at trace time
  DType dtype = DType::float32;  // tensor: its dtype
  double scalar = 0;
  std::vector<onnx_operand> list{};

  [[nodiscard]] bool is_tensor() const noexcept { return kind == Kind::tensor; }
  /// A tensor operand with this value name and shape.
  static onnx_operand tensor(std::string name, Shape shape) {
    return {.kind = Kind::tensor, .name = std::move(name), .shape = std::move(shape)};
  }
};

/// One call to export: its operands, the ONNX name its result must get and its shape, and how
/// messages name it ("%12 (nn.conv2d)").
struct onnx_call {
  std::vector<onnx_operand> in;
  std::string out;
  Shape out_shape{};
  std::string where;
};

/// The value of an ONNX attribute a rule writes.
using onnx_attribute_value = std::variant<std::int64_t, double, std::vector<std::int64_t>, std::string>;
struct onnx_attribute {
  std::string name;
  onnx_attribute_value value;
};

class onnx_export_context;

/// The ONNX graph being built: what export rules add to it.
class onnx_graph_builder {
 public:
  virtual ~onnx_graph_builder() = default;
  /// export_model's dynamic_batch option (rules that write shapes keep the batch extent free).
  [[nodiscard]] virtual bool dynamic_batch() const = 0;
  /// The ai.onnx opset the model declares (rules whose node types changed pick their form by it).
  [[nodiscard]] virtual std::int64_t opset() const = 0;
  /// A value name based on `base`, unique in the model.
  [[nodiscard]] virtual std::string fresh(std::string_view base) = 0;
  virtual void node(const std::string& op_type, const std::vector<std::string>& inputs,
                    const std::vector<std::string>& outputs, const std::vector<onnx_attribute>& attributes) = 0;
  /// A tensor as an initializer, named after `base`.
  virtual std::string initializer(const Tensor& t, std::string_view base) = 0;
  /// A module's tensor, written once however often the module is called.
  virtual std::string weight(const Tensor& t, const std::string& path) = 0;
  /// A float32 scalar constant (rank 0), written once per value.
  virtual std::string scalar(double v) = 0;
  /// A float32 vector of n copies of v.
  virtual std::string filled(double v, std::int64_t n) = 0;
  /// An int64 vector (Reshape's shape).
  virtual std::string ints(const std::vector<std::int64_t>& v, std::string_view base) = 0;
  /// A rank-0 int8 (or, `is_unsigned`, uint8) constant: QuantizeLinear's zero point, whose type
  /// states the quantized range.
  virtual std::string zero_point(std::int64_t v, bool is_unsigned) = 0;
  /// Exports `cx`'s call as the registered function op whose kernel is fused function `function` (an
  /// index into fused_functions: elemwise.fused written out again, one node group per instruction).
  virtual void export_instruction(std::size_t function, onnx_export_context& cx) = 0;
};

/// One call being exported: its operands and output, and the graph its nodes go to.
class onnx_export_context {
 public:
  onnx_export_context(onnx_graph_builder& graph, onnx_call call) : graph_(graph), call_(std::move(call)) {}

  [[nodiscard]] onnx_graph_builder& graph() const noexcept { return graph_; }
  [[nodiscard]] const onnx_call& call() const noexcept { return call_; }
  [[nodiscard]] const onnx_operand& input(std::size_t i) const { return call_.in.at(i); }
  [[nodiscard]] const std::string& output() const noexcept { return call_.out; }
  [[nodiscard]] const Shape& output_shape() const noexcept { return call_.out_shape; }
  /// The same graph, another call: how a rule reuses another op's rule.
  [[nodiscard]] onnx_export_context with(onnx_call call) const { return {graph_, std::move(call)}; }
  /// A call of this context's position with other operands and output.
  [[nodiscard]] onnx_call sub_call(std::vector<onnx_operand> in, std::string out) const {
    return {std::move(in), std::move(out), call_.out_shape, call_.where};
  }

  void node(const std::string& op_type, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
            const std::vector<onnx_attribute>& attributes = {}) {
    graph_.node(op_type, inputs, outputs, attributes);
  }
  /// A node with one output named `out`; returns that name.
  std::string node1(const std::string& op_type, const std::vector<std::string>& inputs, const std::string& out,
                    const std::vector<onnx_attribute>& attributes = {}) {
    graph_.node(op_type, inputs, {out}, attributes);
    return out;
  }
  [[nodiscard]] std::string fresh(std::string_view base) { return graph_.fresh(base); }
  /// The ONNX value of a tensor or number operand.
  std::string value(const onnx_operand& o) { return o.kind == onnx_operand::Kind::scalar ? graph_.scalar(o.scalar) : o.name; }
  /// The value name of an optional tensor operand, or nullopt for None.
  [[nodiscard]] static std::optional<std::string> optional_name(const onnx_operand& o) {
    return o.is_tensor() ? std::optional<std::string>(o.name) : std::nullopt;
  }

  /// The call has no ONNX form: value_error naming it.
  [[noreturn]] void refuse(const std::string& why) const {
    throw value_error("onnx export: " + call_.where + ": " + why);
  }

 private:
  onnx_graph_builder& graph_;
  onnx_call call_;
};

/// A value of the graph being imported, opaque to the rules.
struct onnx_value {
  void* node = nullptr;
};
/// An operand of a recorded call: a graph value, a number or None, or a list of graph values.
using onnx_arg = std::variant<onnx_value, Value, std::vector<onnx_value>>;

/// The spatial geometry of an ONNX conv or pool node: kernel, strides, dilations, symmetric padding.
struct onnx_window {
  pair2 kernel, stride, dilation, padding;
};

/// One ONNX node being imported: its inputs and attributes, and the graph calls it records.
class onnx_import_context {
 public:
  virtual ~onnx_import_context() = default;

  [[nodiscard]] virtual const std::string& op_type() const = 0;
  /// The model's default-domain opset.
  [[nodiscard]] virtual std::int64_t opset() const = 0;

  [[nodiscard]] virtual int input_count() const = 0;
  /// Input i is given (present and not the empty name of an omitted optional input).
  [[nodiscard]] virtual bool has_input(int i) const = 0;
  /// Input i as a graph value.
  virtual onnx_value tensor(int i) = 0;
  /// Input i as a graph value, or None when omitted.
  onnx_arg optional(int i) { return has_input(i) ? onnx_arg(tensor(i)) : onnx_arg(Value(none)); }
  /// The numbers of input i, which must be known at import time (an initializer or a constant).
  virtual std::vector<double> numbers(int i, std::string_view what) = 0;
  /// The integers (a shape, axes) of input i, known at import time and of an integer type, read
  /// exactly; anything else is `unsupported`.
  virtual std::vector<std::int64_t> integers(int i, std::string_view what) = 0;
  [[nodiscard]] virtual const Shape& shape(onnx_value v) const = 0;
  [[nodiscard]] virtual DType dtype(onnx_value v) const = 0;
  /// The shape of input i, which must be known at import time (an index tensor's rank).
  virtual Shape static_shape(int i, std::string_view what) = 0;
  /// Whether input i is known at import time (an initializer, a Constant, a value folded before).
  [[nodiscard]] virtual bool is_static(int i) const = 0;

  [[nodiscard]] virtual bool has_attr(std::string_view name) const = 0;
  [[nodiscard]] virtual std::int64_t attr_int(std::string_view name, std::int64_t fallback) const = 0;
  /// A FLOAT attribute (single precision in ONNX), widened.
  [[nodiscard]] virtual double attr_float(std::string_view name, float fallback) const = 0;
  [[nodiscard]] virtual std::vector<std::int64_t> attr_ints(std::string_view name,
                                                            std::vector<std::int64_t> fallback = {}) const = 0;
  [[nodiscard]] virtual std::string attr_string(std::string_view name, std::string fallback) const = 0;

  /// ONNX conventions shared by the conv and pooling nodes: only the 2-D form (input of rank 4),
  /// the kernel_shape attribute, and the window from strides/dilations/pads/auto_pad.
  virtual void require_2d(const Shape& x) const = 0;
  [[nodiscard]] virtual std::vector<std::int64_t> kernel_shape() const = 0;
  [[nodiscard]] virtual onnx_window window(const Shape& x, const std::vector<std::int64_t>& kernel) const = 0;
  /// Refuses a node whose outputs past the first are used (`what` says what they hold).
  virtual void only_first_output(std::string_view what) const = 0;
  /// The axes of Unsqueeze and Squeeze (an input from opset 13 on, an attribute before), or nullopt.
  virtual std::optional<std::vector<std::int64_t>> axes() = 0;

  /// The node cannot be imported: the error import reports for it.
  [[noreturn]] virtual void unsupported(const std::string& why) const = 0;

  /// Records a call of the registered op `target` with operands and params in canonical order.
  virtual onnx_value call(std::string_view target, std::vector<onnx_arg> operands, std::vector<Value> params) = 0;
  /// The number of outputs the node names (an omitted optional output has the empty name).
  [[nodiscard]] virtual int output_count() const = 0;
  /// Makes `v` the node's output i (renamed after it unless `rename` is false); nothing for an
  /// omitted optional output.
  virtual void bind_output(int i, onnx_value v, bool rename = true) = 0;
  /// Makes `v` the node's first output.
  void bind(onnx_value v, bool rename = true) { bind_output(0, v, rename); }

  /// Records a call of Op with its params struct.
  template <class Op, class... A>
  onnx_value call(const typename Op::params& p, A&&... operands) {
    std::vector<Value> params;
    for_each_param<Op>(p, [&](std::string_view, const auto& v, bool) { params.push_back(to_value(v)); });
    return call(Op::target, std::vector<onnx_arg>{onnx_arg(std::forward<A>(operands))...}, std::move(params));
  }
};

/// "[1, 2, 3]": how import messages show an ints attribute.
inline std::string ints_repr(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// One ONNX node type an op imports: the attributes and the inputs read at import time it accepts.
struct onnx_import_rule {
  std::string op_type;
  std::vector<std::string> attributes;
  std::vector<int> static_inputs;
  void (*convert)(onnx_import_context&) = nullptr;
};

/// Op's import rules, one per entry of Op::onnx_import_types, from its optional members.
template <class Op>
std::vector<onnx_import_rule> onnx_import_rules() {
  std::vector<onnx_import_rule> rules;
  for (std::string_view type : Op::onnx_import_types) {
    onnx_import_rule r{std::string(type), {}, {}, &Op::onnx_import};
    if constexpr (requires { Op::onnx_import_attributes; })
      for (std::string_view a : Op::onnx_import_attributes) r.attributes.emplace_back(a);
    if constexpr (requires { Op::onnx_static_inputs; })
      r.static_inputs.assign(Op::onnx_static_inputs.begin(), Op::onnx_static_inputs.end());
    rules.push_back(std::move(r));
  }
  return rules;
}

/// The ONNX import rule of a call of Op, as ops with one tensor input or two (either side a tensor)
/// write it: the node's inputs in order.
template <class Op>
void onnx_import_unary(onnx_import_context& cx) {
  cx.bind(cx.call<Op>({}, cx.tensor(0)));
}
/// Min, Max, Sum (and Add, Sub, Mul, Div): a chain of binary calls over the inputs; one input is
/// that input.
template <class Op>
void onnx_import_variadic(onnx_import_context& cx) {
  onnx_value acc = cx.tensor(0);
  for (int i = 1; i < cx.input_count(); ++i) acc = cx.call<Op>({}, acc, cx.tensor(i));
  cx.bind(acc, cx.input_count() > 1);
}

/// Whether a tensor operand of the call is int32 (its numbers are then int32 too).
inline bool onnx_int32_operands(const onnx_export_context& cx) {
  for (const onnx_operand& o : cx.call().in)
    if (o.is_tensor() && o.dtype == DType::int32) return true;
  return false;
}

/// The ONNX value of an operand of an int32 call: a tensor's name, or a number as a rank-0 int32
/// initializer (value_error when it is not an int32).
inline std::string onnx_int32_value(onnx_export_context& cx, const onnx_operand& o) {
  if (o.kind != onnx_operand::Kind::scalar) return o.name;
  if (o.scalar != std::trunc(o.scalar) || o.scalar < std::numeric_limits<std::int32_t>::min() ||
      o.scalar > std::numeric_limits<std::int32_t>::max())
    cx.refuse("the number " + std::to_string(o.scalar) + " beside an int32 operand is not an int32");
  Tensor t = Tensor::empty(Shape{}, DType::int32, "onnx export");
  t.data<std::int32_t>()[0] = static_cast<std::int32_t>(o.scalar);
  return cx.graph().initializer(t, "const_int");
}

/// The export rule of an elementwise op: one node of `type` over the operands (numbers become
/// scalar initializers, int32 ones beside an int32 tensor); `reflected` swaps them (x.__rsub__(y)
/// is y - x).
inline void onnx_export_elementwise(onnx_export_context& cx, std::string_view type, bool reflected) {
  std::vector<std::string> in;
  const bool ints = onnx_int32_operands(cx);
  for (const onnx_operand& o : cx.call().in) in.push_back(ints ? onnx_int32_value(cx, o) : cx.value(o));
  if (reflected) std::swap(in[0], in[1]);
  cx.node(std::string(type), in, {cx.output()});
}

}  // namespace tracemod::functional
