// argmax and argmin along one axis (MegEngine's F.argmax / F.argmin, torch.argmax's dim and
// keepdim): the index of the first maximum (minimum) of each row, or with select_last_index the last
// one, as int32 (tracemod's integer type; ONNX's ArgMax and ArgMin give INT64). A NaN counts as the
// extremum, as in numpy and PyTorch. axis=None indexes the flattened input. ONNX: ArgMax / ArgMin
// followed by a Cast to INT32 (the graph's int32), and ArgMax / ArgMin import as these ops.
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/shape_ops.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

namespace tracemod::functional {

/// axis: the reduced axis, None for the flattened input; keepdims keeps it with extent 1;
/// select_last_index picks the last of equal extrema (ONNX's attribute).
struct arg_reduce_params {
  std::optional<std::int64_t> axis{};
  bool keepdims = false;
  bool select_last_index = false;
};

/// argmax (Min false) or argmin (Min true).
template <bool Min>
struct arg_reduce_fn : op_base<arg_reduce_fn<Min>> {
  static constexpr std::string_view name = Min ? "argmin" : "argmax";
  static constexpr std::string_view target = Min ? "math.argmin" : "math.argmax";
  static constexpr std::string_view onnx_type = Min ? "ArgMin" : "ArgMax";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = arg_reduce_params;
  static constexpr std::tuple fields{positional("axis", &params::axis), positional("keepdims", &params::keepdims),
                                     keyword("select_last_index", &params::select_last_index)};

  /// The input seen as [outer, len, inner] around the reduced axis (all of it for axis=None).
  struct layout {
    std::size_t outer = 1, len = 1, inner = 1;
  };
  static constexpr layout layout_of(const params& p, const Shape& x) {
    layout l;
    if (!p.axis) {
      l.len = static_cast<std::size_t>(x.numel());
      return l;
    }
    const std::size_t a = normalize_axis(*p.axis, x.rank(), target);
    for (std::size_t i = 0; i < x.rank(); ++i) {
      const auto e = static_cast<std::size_t>(x[i]);
      (i < a ? l.outer : i == a ? l.len : l.inner) *= e;
    }
    return l;
  }
  static constexpr Shape infer_shape(const params& p, const Shape& x) {
    if (const layout l = layout_of(p, x); l.len == 0 && l.outer * l.inner > 0)
      throw shape_error(std::string(target) + ": the reduced axis of an input of shape " + x.to_string() +
                        " is empty, which has no " + std::string(Min ? "minimum" : "maximum"));
    Shape out;
    if (!p.axis) {
      if (p.keepdims)
        for (std::size_t i = 0; i < x.rank(); ++i) out.push_back(1);
      return out;
    }
    const std::size_t a = normalize_axis(*p.axis, x.rank(), target);
    for (std::size_t i = 0; i < x.rank(); ++i) {
      if (i != a)
        out.push_back(x[i]);
      else if (p.keepdims)
        out.push_back(1);
    }
    return out;
  }
  static DType infer_dtype(const params*, std::span<const DType>) { return DType::int32; }
  /// One comparison per input element.
  static constexpr op_cost cost(const params&, const Shape&, const Shape& x) { return flop_cost(x.numel()); }

  static Tensor eager(const params& p, const Tensor& x) {
    require_float32(target, "inp", x);
    Tensor y = Tensor::empty(infer_shape(p, x.shape()), DType::int32, target);
    const layout l = layout_of(p, x.shape());
    const float* in = x.data<float>();
    std::int32_t* out = y.data<std::int32_t>();
    // v replaces the best so far m: it is more extreme, or equal with select_last_index; NaN wins
    // once and stays.
    const auto better = [&](float v, float m) {
      if (std::isnan(m)) return false;
      if (std::isnan(v)) return true;
      return (Min ? v < m : v > m) || (p.select_last_index && v == m);
    };
    for (std::size_t o = 0; o < l.outer; ++o)
      for (std::size_t i = 0; i < l.inner; ++i) {
        const float* row = in + o * l.len * l.inner + i;
        std::size_t at = 0;
        for (std::size_t k = 1; k < l.len; ++k)
          if (better(row[k * l.inner], row[at * l.inner])) at = k;
        out[o * l.inner + i] = static_cast<std::int32_t>(at);
      }
    return y;
  }

  /// ArgMax/ArgMin over the axis (axis=None only on a rank-1 input), then Cast to INT32.
  static void onnx_export(onnx_export_context& cx, const params& p) {
    const Shape& x = cx.input(0).shape;
    if (!p.axis && x.rank() != 1)
      cx.refuse("axis=None on an input of shape " + x.to_string() + " (ONNX's " + std::string(onnx_type) + " takes one axis)");
    const std::int64_t axis = p.axis ? static_cast<std::int64_t>(normalize_axis(*p.axis, x.rank(), target)) : 0;
    const std::string index = cx.node1(std::string(onnx_type), {cx.input(0).name}, cx.fresh(cx.output() + "_int64"),
                                       {{"axis", axis},
                                        {"keepdims", std::int64_t{p.keepdims ? 1 : 0}},
                                        {"select_last_index", std::int64_t{p.select_last_index ? 1 : 0}}});
    cx.node("Cast", {index}, {cx.output()}, {{"to", std::int64_t{6}}});  // TensorProto::INT32
  }
  static constexpr std::array onnx_import_types{onnx_type};
  static constexpr std::array onnx_import_attributes{std::string_view("axis"), std::string_view("keepdims"),
                                                     std::string_view("select_last_index")};
  /// axis defaults to 0 and keepdims to 1.
  static void onnx_import(onnx_import_context& cx) {
    cx.bind(cx.call<arg_reduce_fn>({cx.attr_int("axis", 0), cx.attr_int("keepdims", 1) != 0,
                                    cx.attr_int("select_last_index", 0) != 0},
                                   cx.tensor(0)));
  }
};

using argmax_fn = arg_reduce_fn<false>;
using argmin_fn = arg_reduce_fn<true>;
inline constexpr argmax_fn argmax{};
inline constexpr argmin_fn argmin{};
TRACEMOD_REGISTER_BUILTIN_OP(argmax_fn);
TRACEMOD_REGISTER_BUILTIN_OP(argmin_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
