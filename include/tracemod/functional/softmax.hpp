// softmax along one axis (numerically stable).
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/shape_ops.hpp>
#include <tracemod/kernels/softmax.hpp>

#include <array>
#include <optional>
#include <tuple>

namespace tracemod::functional {

/// axis=None picks MegEngine's default: 0 for rank 0, 1 and 3, else 1.
struct softmax_params {
  std::optional<std::int64_t> axis{};
};

struct softmax_fn : op_base<softmax_fn> {
  static constexpr std::string_view name = "softmax";
  static constexpr std::string_view target = "nn.softmax";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = softmax_params;
  static constexpr std::tuple fields{positional("axis", &params::axis)};

  static constexpr std::size_t resolved_axis(const params& p, const Shape& x) {
    if (x.rank() == 0) return normalize_axis(p.axis.value_or(0), 1, target);  // a scalar has axis 0 (or -1)
    const std::int64_t default_axis = (x.rank() == 1 || x.rank() == 3) ? 0 : 1;
    return normalize_axis(p.axis.value_or(default_axis), x.rank(), target);
  }
  static constexpr Shape infer_shape(const params& p, const Shape& x) {
    (void)resolved_axis(p, x);
    return x;
  }
  static Dims infer_dims(const params&, const ShapeDims& x) { return x.dims; }
  /// Per element: the running max, the exponential, the sum and the division.
  static constexpr op_cost cost(const params&, const Shape& out, const Shape&) { return flop_cost(4 * out.numel()); }
  static Tensor eager(const params& p, const Tensor& x) {
    require_float32(target, "inp", x);
    const std::size_t axis = resolved_axis(p, x.shape());
    const Shape& s = x.shape();
    std::size_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < axis; ++i) outer *= static_cast<std::size_t>(s[i]);
    for (std::size_t i = axis + 1; i < s.rank(); ++i) inner *= static_cast<std::size_t>(s[i]);
    const auto len = s.rank() == 0 ? std::size_t{1} : static_cast<std::size_t>(s[axis]);
    Tensor y = Tensor::empty(s, DType::float32, target);
    kernels::softmax(x.data<float>(), y.data<float>(), outer, len, inner);
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params& p) {
    const Shape& x = cx.input(0).shape;
    if (x.rank() == 0) cx.refuse("softmax of a scalar");
    cx.node("Softmax", {cx.input(0).name}, {cx.output()}, {{"axis", static_cast<std::int64_t>(resolved_axis(p, x))}});
  }
  static constexpr std::array onnx_import_types{std::string_view("Softmax")};
  static constexpr std::array onnx_import_attributes{std::string_view("axis")};
  static void onnx_import(onnx_import_context& cx) {
    const onnx_value x = cx.tensor(0);
    const Shape s = cx.shape(x);
    const std::int64_t axis = cx.attr_int("axis", cx.opset() < 13 ? 1 : -1);
    const std::size_t a = normalize_axis(axis, s.rank(), "Softmax");
    if (cx.opset() >= 13 || a + 1 == s.rank()) {
      cx.bind(cx.call<softmax_fn>({static_cast<std::int64_t>(a)}, x));
      return;
    }
    // Before opset 13, Softmax normalises over every axis from `axis` on (the input seen as 2-D).
    const onnx_value flat = cx.call<reshape_fn>({detail::to_2d(s, a)}, x);
    const onnx_value y = cx.call<softmax_fn>({std::int64_t{1}}, flat);
    cx.bind(cx.call<reshape_fn>({detail::as_list(s)}, y));
  }
};
inline constexpr softmax_fn softmax{};
TRACEMOD_REGISTER_BUILTIN_OP(softmax_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
