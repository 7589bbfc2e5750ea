// pad: PyTorch's F.pad (MegEngine's F.nn.pad) in its "constant", "reflect" and "replicate" modes.
// The pad list is PyTorch's: (left, right) for the last axis, then (top, bottom) for the one before,
// and so on, so a list of 2k values pads the last k axes; a negative pad crops.
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

namespace tracemod::kernels {

enum class pad_mode : std::uint8_t { constant, reflect, replicate };

/// The input index that output index `o` of an axis of extent `n` padded by `before` reads, or -1 for
/// the constant: reflect mirrors about the edge without repeating it, replicate repeats the edge.
/// The caller checks that reflect's pads are below n and that replicate pads a non-empty axis.
constexpr std::int64_t pad_source(std::int64_t o, std::int64_t before, std::int64_t n, pad_mode mode) noexcept {
  const std::int64_t i = o - before;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case pad_mode::constant: return -1;
    case pad_mode::reflect: return i < 0 ? -i : 2 * (n - 1) - i;
    case pad_mode::replicate: return i < 0 ? 0 : n - 1;
  }
  return -1;
}

/// y (shape `out`) = x (shape `in`) padded by before[a] elements in front of each axis a (after[a] =
/// out[a] - in[a] - before[a] behind it). One pass over the output rows: a row whose leading index
/// reads the constant is filled, any other copies its source row through the last axis' map.
template <class T>
void pad(const T* x, const Shape& in, const Shape& out, const std::int64_t* before, pad_mode mode, T value, T* y) {
  const std::size_t r = in.rank();
  if (r == 0) {
    *y = *x;
    return;
  }
  if (out.numel() == 0) return;
  const std::int64_t w_out = out[r - 1], w_in = in[r - 1];
  std::vector<std::int64_t> stride(r, 1);
  for (std::size_t a = r - 1; a-- > 0;) stride[a] = stride[a + 1] * in[a + 1];
  std::vector<std::int64_t> col(static_cast<std::size_t>(w_out));
  for (std::int64_t o = 0; o < w_out; ++o) col[static_cast<std::size_t>(o)] = pad_source(o, before[r - 1], w_in, mode);
  std::vector<std::int64_t> index(r, 0);  // the output row's leading indices (the last stays 0)
  const std::int64_t rows = out.numel() / w_out;
  for (std::int64_t row = 0; row < rows; ++row, y += w_out) {
    std::int64_t src = 0;
    bool fill = false;
    for (std::size_t a = 0; a + 1 < r; ++a) {
      const std::int64_t i = pad_source(index[a], before[a], in[a], mode);
      if (i < 0) fill = true;
      src += i * stride[a];
    }
    for (std::int64_t o = 0; o < w_out; ++o) {
      const std::int64_t j = col[static_cast<std::size_t>(o)];
      y[o] = fill || j < 0 ? value : x[src + j];
    }
    for (std::size_t a = r - 1; a-- > 0;) {  // the next row: an odometer over the leading axes
      if (++index[a] < out[a]) break;
      index[a] = 0;
    }
  }
}

}  // namespace tracemod::kernels

namespace tracemod::functional {

struct pad_params {
  int_list pad;                   ///< (left, right) of the last axis, then of the one before, ...
  std::string mode = "constant";  ///< "constant", "reflect" (edge not repeated) or "replicate"
  double value = 0;               ///< what constant mode fills with
};

/// Pads (or, with negative pads, crops) the trailing axes, as PyTorch's F.pad.
struct pad_fn : op_base<pad_fn> {
  static constexpr std::string_view name = "pad";
  static constexpr std::string_view target = "nn.pad";
  static constexpr call_kind kind = call_kind::function;
  static constexpr bool any_dtype = true;  // moves elements: float32 and int32 alike
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = pad_params;
  static constexpr std::tuple fields{required("pad", &params::pad), positional("mode", &params::mode),
                                     positional("value", &params::value)};

  static constexpr kernels::pad_mode mode_of(const params& p) {
    if (p.mode == "constant") return kernels::pad_mode::constant;
    if (p.mode == "reflect") return kernels::pad_mode::reflect;
    if (p.mode == "replicate") return kernels::pad_mode::replicate;
    throw value_error(std::string(target) + ": mode is '" + p.mode + "' (supported: constant, reflect, replicate)");
  }
  /// The pads in front of and behind each axis of a rank-`rank` input.
  struct axis_pads {
    std::array<std::int64_t, Shape::max_rank> before{}, after{};
  };
  static constexpr axis_pads per_axis(const params& p, std::size_t rank) {
    if (p.pad.size() % 2 != 0 || p.pad.size() / 2 > rank)
      throw value_error(std::string(target) + ": pad " + repr(p.pad) + " must hold a (before, after) pair for each of at most " +
                        std::to_string(rank) + " trailing axes");
    axis_pads a;
    for (std::size_t k = 0; k < p.pad.size() / 2; ++k) {
      a.before[rank - 1 - k] = p.pad[2 * k];
      a.after[rank - 1 - k] = p.pad[2 * k + 1];
    }
    return a;
  }

  static constexpr Shape infer_shape(const params& p, const Shape& x) {
    const kernels::pad_mode mode = mode_of(p);
    const axis_pads a = per_axis(p, x.rank());
    Shape out;
    for (std::size_t i = 0; i < x.rank(); ++i) {
      const std::int64_t b = a.before[i], e = a.after[i], n = x[i];
      const auto fail = [&](const std::string& why) {
        return shape_error(std::string(target) + ": pad " + repr(p.pad) + " (mode " + p.mode + ") of an input of shape " +
                           x.to_string() + ": axis " + std::to_string(i) + " " + why);
      };
      if (n + b + e < 0) throw fail("would have a negative extent " + std::to_string(n + b + e));
      if (mode == kernels::pad_mode::reflect && (b >= n || e >= n))
        throw fail("has extent " + std::to_string(n) + ", and reflect needs each pad below it");
      if (mode == kernels::pad_mode::replicate && n == 0 && (b > 0 || e > 0))
        throw fail("is empty, and replicate has no edge to repeat");
      out.push_back(n + b + e);
    }
    return out;
  }
  /// Each axis' dims plus its two pads (reflect's bound on the pads is checked by the run).
  static Dims infer_dims(const params& p, const ShapeDims& x) {
    (void)mode_of(p);
    const axis_pads a = per_axis(p, x.dims.size());
    Dims out;
    for (std::size_t i = 0; i < x.dims.size(); ++i) out.push_back(x.dims[i] + DimExpr(a.before[i] + a.after[i]));
    return out;
  }
  /// No arithmetic: the input read and the output written.
  static constexpr op_cost cost(const params&, const Shape&, const Shape&) { return {}; }

  static Tensor eager(const params& p, const Tensor& x) {
    require_defined(target, "inp", x);
    const Shape out = infer_shape(p, x.shape());
    const axis_pads a = per_axis(p, x.shape().rank());
    const kernels::pad_mode mode = mode_of(p);
    Tensor y = Tensor::empty(out, x.dtype(), target);
    visit_dtype(x.dtype(), [&]<class T>(T) {
      const T fill = std::is_same_v<T, bool> ? T(p.value != 0.0) : static_cast<T>(p.value);
      kernels::pad(x.data<T>(), x.shape(), out, a.before.data(), mode, fill, y.data<T>());
    });
    return y;
  }

  /// ONNX's Pad (opset 11 on): pads as an int64 input over every axis, [x1_begin, ..., x1_end, ...].
  static void onnx_export(onnx_export_context& cx, const params& p) {
    const Shape& x = cx.input(0).shape;
    const axis_pads a = per_axis(p, x.rank());
    std::vector<std::int64_t> pads(2 * x.rank());
    for (std::size_t i = 0; i < x.rank(); ++i) {
      pads[i] = a.before[i];
      pads[x.rank() + i] = a.after[i];
    }
    const kernels::pad_mode mode = mode_of(p);
    std::vector<std::string> in{cx.input(0).name, cx.graph().ints(pads, "pads")};
    if (mode == kernels::pad_mode::constant && p.value != 0) in.push_back(cx.graph().scalar(p.value));
    std::vector<onnx_attribute> attributes;  // constant is ONNX's default mode
    if (mode == kernels::pad_mode::reflect) attributes.push_back({"mode", std::string("reflect")});
    if (mode == kernels::pad_mode::replicate) attributes.push_back({"mode", std::string("edge")});
    cx.node("Pad", in, {cx.output()}, attributes);
  }
  static constexpr std::array onnx_import_types{std::string_view("Pad")};
  static constexpr std::array onnx_import_attributes{std::string_view("mode"), std::string_view("pads"),
                                                     std::string_view("value")};
  static constexpr std::array onnx_static_inputs{1, 2, 3};
  static void onnx_import(onnx_import_context& cx);
};
inline constexpr pad_fn pad{};
TRACEMOD_REGISTER_BUILTIN_OP(pad_fn);

/// Pad's pads (an attribute before opset 11, then input 1, over the axes of input 3 from opset 18
/// or else every axis) become PyTorch's list over the trailing axes that have a nonzero pad.
inline void pad_fn::onnx_import(onnx_import_context& cx) {
  const onnx_value x = cx.tensor(0);
  const Shape& s = cx.shape(x);
  const std::size_t r = s.rank();
  const bool inputs = cx.opset() >= 11;
  const std::vector<std::int64_t> pads = inputs ? cx.integers(1, "pads") : cx.attr_ints("pads");
  std::vector<std::int64_t> axes;
  if (inputs && cx.has_input(3)) {
    axes = cx.integers(3, "axes");
  } else {
    for (std::size_t i = 0; i < r; ++i) axes.push_back(static_cast<std::int64_t>(i));
  }
  if (pads.size() != 2 * axes.size())
    cx.unsupported("pads " + ints_repr(pads) + " for " + std::to_string(axes.size()) + " axes of an input of shape " +
                   s.to_string());
  std::vector<std::int64_t> before(r, 0), after(r, 0);
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const std::size_t a = normalize_axis(axes[k], r, "Pad");
    before[a] = pads[k];
    after[a] = pads[axes.size() + k];
  }
  const std::string onnx_mode = cx.attr_string("mode", "constant");
  std::string mode;
  if (onnx_mode == "constant" || onnx_mode == "reflect") mode = onnx_mode;
  else if (onnx_mode == "edge") mode = "replicate";
  else cx.unsupported("mode '" + onnx_mode + "'");
  double value = 0;
  if (!inputs) {
    value = cx.attr_float("value", 0.f);
  } else if (cx.has_input(2)) {
    const std::vector<double> v = cx.numbers(2, "constant_value");
    if (v.size() != 1) cx.unsupported("a constant_value of " + std::to_string(v.size()) + " values");
    value = v[0];
  }
  std::size_t first = r;  // the leading axis with a nonzero pad; it and every axis after it are listed
  for (std::size_t i = r; i-- > 0;)
    if (before[i] != 0 || after[i] != 0) first = i;
  if (first == r) return cx.bind(x, false);
  if (2 * (r - first) > int_list::max_size)
    cx.unsupported("pads " + ints_repr(pads) + " on " + std::to_string(r - first) + " axes (at most " +
                   std::to_string(int_list::max_size / 2) + ")");
  int_list list;
  for (std::size_t i = r; i-- > first;) {
    list.push_back(before[i]);
    list.push_back(after[i]);
  }
  cx.bind(cx.call<pad_fn>({list, mode, value}, x));
}

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
