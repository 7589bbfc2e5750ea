// softmax, log_softmax and hardmax along one axis: one op template, three ops, as ONNX's Softmax,
// LogSoftmax and Hardmax.
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/shape_ops.hpp>
#include <tracemod/kernels/softmax.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>

namespace tracemod::functional {

/// axis=None picks MegEngine's default: 0 for rank 0, 1 and 3, else 1.
struct softmax_params {
  std::optional<std::int64_t> axis{};
};

namespace detail {
struct softmax_names {
  std::string_view name, target, onnx;
};
inline constexpr std::array<softmax_names, 3> softmax_table{{{"softmax", "nn.softmax", "Softmax"},
                                                             {"log_softmax", "nn.log_softmax", "LogSoftmax"},
                                                             {"hardmax", "nn.hardmax", "Hardmax"}}};
}  // namespace detail

enum class softmax_kind : std::uint8_t { softmax, log_softmax, hardmax };

/// softmax, log_softmax (x - max - log(sum(exp(x - max))), computed in double per row, so large
/// inputs neither overflow nor lose the result to rounding) or hardmax (1 at the first maximum of
/// each row, 0 elsewhere; a NaN is the maximum).
template <softmax_kind K>
struct softmax_op : op_base<softmax_op<K>> {
  static constexpr std::string_view name = detail::softmax_table[static_cast<std::size_t>(K)].name;
  static constexpr std::string_view target = detail::softmax_table[static_cast<std::size_t>(K)].target;
  static constexpr std::string_view onnx_type = detail::softmax_table[static_cast<std::size_t>(K)].onnx;
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
    if constexpr (K == softmax_kind::log_softmax)
      kernels::log_softmax(x.data<float>(), y.data<float>(), outer, len, inner);
    else if constexpr (K == softmax_kind::hardmax)
      kernels::hardmax(x.data<float>(), y.data<float>(), outer, len, inner);
    else
      kernels::softmax(x.data<float>(), y.data<float>(), outer, len, inner);
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params& p) {
    const Shape& x = cx.input(0).shape;
    if (x.rank() == 0) cx.refuse(std::string(name) + " of a scalar");
    cx.node(std::string(onnx_type), {cx.input(0).name}, {cx.output()}, {{"axis", static_cast<std::int64_t>(resolved_axis(p, x))}});
  }
  static constexpr std::array onnx_import_types{onnx_type};
  static constexpr std::array onnx_import_attributes{std::string_view("axis")};
  static void onnx_import(onnx_import_context& cx) {
    const onnx_value x = cx.tensor(0);
    const Shape s = cx.shape(x);
    const std::int64_t axis = cx.attr_int("axis", cx.opset() < 13 ? 1 : -1);
    const std::size_t a = normalize_axis(axis, s.rank(), onnx_type);
    if (cx.opset() >= 13 || a + 1 == s.rank()) {
      cx.bind(cx.call<softmax_op>({static_cast<std::int64_t>(a)}, x));
      return;
    }
    // Before opset 13, Softmax normalises over every axis from `axis` on (the input seen as 2-D).
    const onnx_value flat = cx.call<reshape_fn>({detail::to_2d(s, a)}, x);
    const onnx_value y = cx.call<softmax_op>({std::int64_t{1}}, flat);
    cx.bind(cx.call<reshape_fn>({detail::as_list(s)}, y));
  }
};
using softmax_fn = softmax_op<softmax_kind::softmax>;
using log_softmax_fn = softmax_op<softmax_kind::log_softmax>;
using hardmax_fn = softmax_op<softmax_kind::hardmax>;
inline constexpr softmax_fn softmax{};
inline constexpr log_softmax_fn log_softmax{};
inline constexpr hardmax_fn hardmax{};
TRACEMOD_REGISTER_BUILTIN_OP(softmax_fn);
TRACEMOD_REGISTER_BUILTIN_OP(log_softmax_fn);
TRACEMOD_REGISTER_BUILTIN_OP(hardmax_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
