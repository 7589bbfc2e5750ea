// Elemwise: an elementwise op chosen by a mode string, as MegEngine's M.Elemwise ("ADD",
// "FUSE_ADD_RELU", ...). Quantization-aware conversion replaces these modules, so models write
// `add_relu(a, b)` through one instead of with operators.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tracemod::nn {

class Elemwise : public Module {
 public:
  enum class Mode : std::uint8_t {
    relu, sigmoid, tanh, exp, negate,                                   // unary
    add, sub, mul, true_div, min, max,                                  // binary
    fuse_add_relu, fuse_add_sigmoid, fuse_add_tanh,                     // binary, then unary
  };

  /// The mode names MegEngine accepts (case-insensitive), in Mode order.
  static constexpr std::array<std::string_view, 14> mode_names{
      "RELU", "SIGMOID", "TANH", "EXP", "NEGATE", "ADD", "SUB", "MUL", "TRUE_DIV", "MIN", "MAX",
      "FUSE_ADD_RELU", "FUSE_ADD_SIGMOID", "FUSE_ADD_TANH"};

  Mode mode;

  explicit Elemwise(std::string_view method) : mode(parse(method)) {}

  TM_BUILTIN_MODULE(Elemwise)
  [[nodiscard]] Value config() const { return Value::dict({{"method", std::string(method())}}); }
  static Elemwise from_config(const Value& c) {
    return Elemwise(config_field<std::string>(c, "Elemwise", "method"));
  }

  /// "ADD", "FUSE_ADD_RELU", ...: MegEngine's `method`.
  [[nodiscard]] std::string_view method() const noexcept { return mode_names[static_cast<std::size_t>(mode)]; }
  [[nodiscard]] std::size_t arity() const noexcept { return mode < Mode::add ? 1 : 2; }

  [[nodiscard]] Tensor forward(const Tensor& x) const {
    check_arity(1);
    switch (mode) {
      case Mode::relu: return functional::relu(x);
      case Mode::sigmoid: return functional::sigmoid(x);
      case Mode::tanh: return functional::tanh(x);
      case Mode::exp: return functional::exp(x);
      default: return functional::neg(x);
    }
  }

  [[nodiscard]] Tensor forward(const Tensor& x, const Tensor& y) const {
    check_arity(2);
    switch (mode) {
      case Mode::add: return functional::add(x, y);
      case Mode::sub: return functional::sub(x, y);
      case Mode::mul: return functional::mul(x, y);
      case Mode::true_div: return functional::div(x, y);
      case Mode::min: return functional::minimum(x, y);
      case Mode::max: return functional::maximum(x, y);
      case Mode::fuse_add_relu:  // one pass, with the conv epilogue's add and activation
        return functional::detail::eager_binary<functional::add_fn, kernels::add_relu_op>(x, y);
      case Mode::fuse_add_sigmoid: return functional::sigmoid(functional::add(x, y));
      default: return functional::tanh(functional::add(x, y));
    }
  }

  [[nodiscard]] Shape infer_shape(const Shape& x) const {
    check_arity(1);
    return x;
  }
  [[nodiscard]] Shape infer_shape(const Shape& x, const Shape& y) const {
    check_arity(2);
    return broadcast_shapes(x, y, "Elemwise(" + std::string(method()) + ")");
  }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x, const ShapeDims& y) const {
    return broadcast_dims(x.dims, x.shape, y.dims, y.shape, "Elemwise(" + std::string(method()) + ")");
  }
  /// As the elementwise ops it runs: one operation per output element (two for the fused modes).
  [[nodiscard]] functional::op_cost cost(const Shape& x) const {
    const Shape out = infer_shape(x);
    return {0, out.numel(), functional::float_bytes(x), functional::float_bytes(out)};
  }
  [[nodiscard]] functional::op_cost cost(const Shape& x, const Shape& y) const {
    const Shape out = infer_shape(x, y);
    return {0, (mode >= Mode::fuse_add_relu ? 2 : 1) * out.numel(), functional::float_bytes(x) + functional::float_bytes(y),
            functional::float_bytes(out)};
  }

  [[nodiscard]] std::string extra_repr() const override { return "method=" + std::string(method()); }

  /// The rule of the op the mode runs (the fused modes: Add, then the activation).
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    namespace F = functional;
    switch (mode) {
      case Mode::relu: return F::relu_fn::onnx_export(cx, {});
      case Mode::sigmoid: return F::sigmoid_fn::onnx_export(cx, {});
      case Mode::tanh: return F::tanh_fn::onnx_export(cx, {});
      case Mode::exp: return F::exp_fn::onnx_export(cx, {});
      case Mode::negate: return F::neg_fn::onnx_export(cx, {});
      case Mode::add: return F::add_fn::onnx_export(cx, {});
      case Mode::sub: return F::sub_fn::onnx_export(cx, {});
      case Mode::mul: return F::mul_fn::onnx_export(cx, {});
      case Mode::true_div: return F::div_fn::onnx_export(cx, {});
      case Mode::min: return F::minimum_fn::onnx_export(cx, {});
      case Mode::max: return F::maximum_fn::onnx_export(cx, {});
      case Mode::fuse_add_relu: return export_add_then<F::relu_fn>(cx);
      case Mode::fuse_add_sigmoid: return export_add_then<F::sigmoid_fn>(cx);
      case Mode::fuse_add_tanh: return export_add_then<F::tanh_fn>(cx);
    }
  }

 private:
  static Mode parse(std::string_view method) {
    std::string upper(method);
    for (char& c : upper)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    for (std::size_t i = 0; i < mode_names.size(); ++i)
      if (mode_names[i] == upper) return static_cast<Mode>(i);
    std::string known;
    for (std::string_view n : mode_names) known += (known.empty() ? "" : ", ") + std::string(n);
    throw value_error("Elemwise: unknown mode '" + std::string(method) + "' (supported: " + known + ")");
  }

  template <class Activation>
  static void export_add_then(functional::onnx_export_context& cx) {
    const std::string sum = cx.fresh(cx.output() + "_Add");
    functional::onnx_export_context add = cx.with(cx.sub_call(cx.call().in, sum));
    functional::add_fn::onnx_export(add, {});
    functional::onnx_export_context act =
        cx.with(cx.sub_call({functional::onnx_operand::tensor(sum, cx.output_shape())}, cx.output()));
    Activation::onnx_export(act, {});
  }

  void check_arity(std::size_t given) const {
    if (given != arity())
      throw value_error("Elemwise(" + std::string(method()) + ") takes " + std::to_string(arity()) + " input" +
                        (arity() == 1 ? "" : "s") + ", got " + std::to_string(given));
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(Elemwise)

}  // namespace tracemod::nn
