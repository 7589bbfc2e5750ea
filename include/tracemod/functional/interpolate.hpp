// interpolate: PyTorch's F.interpolate (MegEngine's F.nn.interpolate) on [N, C, H, W] float32
// tensors, in its "nearest" (legacy: src = floor(dst * in / out)) and "bilinear" modes. The output
// extent is `size`, or floor(in * scale_factor); a given scale factor is also what the source
// coordinates are computed from (PyTorch's default recompute_scale_factor=None), so
// interpolate(x, {.scale_factor = 1.5}) and interpolate(x, size) may differ by a source pixel.
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/interpolate.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace tracemod::functional {

struct interpolate_params {
  std::optional<pair2> size{};           ///< the output (H, W); exactly one of size and scale_factor
  std::optional<double> scale_factor{};  ///< the same factor for H and W
  std::string mode = "nearest";          ///< "nearest" or "bilinear"
  std::optional<bool> align_corners{};   ///< bilinear only; None means False
};

/// Resizes the two trailing axes of an NCHW tensor, as PyTorch's F.interpolate.
struct interpolate_fn : op_base<interpolate_fn> {
  static constexpr std::string_view name = "interpolate";
  static constexpr std::string_view target = "nn.interpolate";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = interpolate_params;
  static constexpr std::tuple fields{positional("size", &params::size), positional("scale_factor", &params::scale_factor),
                                     positional("mode", &params::mode), positional("align_corners", &params::align_corners)};
  static constexpr scale_rule scaling = scale_rule::linear;  // a copy or a convex mix of k*x is k times it

  static bool bilinear(const params& p) {
    if (p.mode == "nearest") {
      if (p.align_corners)
        throw value_error(std::string(target) + ": align_corners only applies to mode 'bilinear', not 'nearest'");
      return false;
    }
    if (p.mode == "bilinear") return true;
    throw value_error(std::string(target) + ": mode is '" + p.mode + "' (supported: nearest, bilinear)");
  }
  /// The checks that do not depend on the input's extents.
  static void check_params(const params& p, std::size_t rank, const std::string& shape_text) {
    (void)bilinear(p);
    if (rank != 4)
      throw shape_error(std::string(target) + ": the input must be NCHW (rank 4), got shape " + shape_text);
    if (p.size.has_value() == p.scale_factor.has_value())
      throw value_error(std::string(target) + ": give exactly one of size and scale_factor (input of shape " + shape_text +
                        ", size " + repr(p.size) + ", scale_factor " + repr(p.scale_factor) + ")");
    if (p.size && (p.size->h <= 0 || p.size->w <= 0))
      throw value_error(std::string(target) + ": size " + repr(*p.size) + " must be positive (input of shape " +
                        shape_text + ")");
    if (p.scale_factor && !(*p.scale_factor > 0 && std::isfinite(*p.scale_factor)))
      throw value_error(std::string(target) + ": scale_factor " + repr(*p.scale_factor) +
                        " must be a positive finite number (input of shape " + shape_text + ")");
  }
  /// floor(in * scale) as PyTorch computes it (in double).
  static std::int64_t scaled(std::int64_t in, double scale) {
    return static_cast<std::int64_t>(std::floor(static_cast<double>(in) * scale));
  }

  static Shape infer_shape(const params& p, const Shape& x) {
    check_params(p, x.rank(), x.to_string());
    const std::int64_t h = p.size ? p.size->h : scaled(x[2], *p.scale_factor);
    const std::int64_t w = p.size ? p.size->w : scaled(x[3], *p.scale_factor);
    if (h <= 0 || w <= 0 || x[2] <= 0 || x[3] <= 0)
      throw shape_error(std::string(target) + ": an input of shape " + x.to_string() + " resized to (" +
                        std::to_string(h) + ", " + std::to_string(w) + ") has an empty axis");
    return Shape{x[0], x[1], h, w};
  }
  /// A size keeps N and C symbolic; a scale factor needs static H and W unless it is an integer.
  static Dims infer_dims(const params& p, const ShapeDims& x) {
    check_params(p, x.dims.size(), to_string(x.dims));
    const Shape s = infer_shape(p, x.shape);
    const auto extent = [&](std::size_t axis) -> DimExpr {
      if (x.dims[axis].is_constant()) return s[axis];
      const double f = *p.scale_factor;
      if (p.size || f != std::floor(f))
        throw shape_error(std::string(target) + ": scale_factor " + repr(f) + " needs a static extent on axis " +
                          std::to_string(axis) + ", but the input is " + to_string(x.dims));
      return x.dims[axis] * DimExpr(static_cast<std::int64_t>(f));
    };
    if (p.size) return {x.dims[0], x.dims[1], p.size->h, p.size->w};
    return {x.dims[0], x.dims[1], extent(2), extent(3)};
  }
  /// Nearest copies; bilinear takes four multiplies and three adds per output element.
  static op_cost cost(const params& p, const Shape& out, const Shape&) {
    return flop_cost(bilinear(p) ? 7 * out.numel() : 0);
  }

  static Tensor eager(const params& p, const Tensor& x) {
    require_float32(target, "inp", x);
    const Shape out = infer_shape(p, x.shape());
    Tensor y = Tensor::empty(out, DType::float32, target);
    const std::int64_t planes = out[0] * out[1];
    if (bilinear(p))
      kernels::interpolate_bilinear(x.data<float>(), planes, x.size(2), x.size(3), out[2], out[3],
                                    p.align_corners.value_or(false), p.scale_factor, p.scale_factor, y.data<float>());
    else
      kernels::interpolate_nearest(x.data<float>(), planes, x.size(2), x.size(3), out[2], out[3], p.scale_factor,
                                   p.scale_factor, y.data<float>());
    return y;
  }

  /// ONNX's Resize (opset 13): roi omitted; scales [1, 1, s, s] for a scale factor (without
/// align_corners), else sizes.
  static void onnx_export(onnx_export_context& cx, const params& p);
  static constexpr std::array onnx_import_types{std::string_view("Resize"), std::string_view("Upsample")};
  static constexpr std::array onnx_import_attributes{
      std::string_view("mode"), std::string_view("coordinate_transformation_mode"), std::string_view("nearest_mode"),
      std::string_view("cubic_coeff_a"), std::string_view("exclude_outside"), std::string_view("extrapolation_value")};
  static constexpr std::array onnx_static_inputs{1, 2, 3};
  static void onnx_import(onnx_import_context& cx);
};
inline constexpr interpolate_fn interpolate{};
TRACEMOD_REGISTER_BUILTIN_OP(interpolate_fn);

inline void interpolate_fn::onnx_export(onnx_export_context& cx, const params& p) {
  const bool linear = bilinear(p);
  std::vector<onnx_attribute> attributes{{"mode", std::string(linear ? "linear" : "nearest")}};
  if (!linear) {
    attributes.push_back({"coordinate_transformation_mode", std::string("asymmetric")});
    attributes.push_back({"nearest_mode", std::string("floor")});
  } else {
    // half_pixel, not pytorch_half_pixel: PyTorch's own kernel keeps the half-pixel rule on an
    // output extent of 1, where pytorch_half_pixel would read pixel 0.
    attributes.push_back(
        {"coordinate_transformation_mode", std::string(p.align_corners.value_or(false) ? "align_corners" : "half_pixel")});
  }
  std::vector<std::string> in{cx.input(0).name, ""};
  // align_corners reads no scale in PyTorch, but ONNX's would stretch to the unrounded in * scale
  if (p.scale_factor && !p.align_corners.value_or(false)) {
    const auto s = static_cast<float>(*p.scale_factor);
    if (static_cast<double>(s) != *p.scale_factor)
      cx.refuse("scale_factor " + repr(*p.scale_factor) + " is not a float32 value, which Resize's scales hold");
    Tensor scales = Tensor::empty(Shape{4}, DType::float32, target);
    float* v = scales.data<float>();
    v[0] = v[1] = 1.f;
    v[2] = v[3] = s;
    in.push_back(cx.graph().initializer(scales, "scales"));
  } else {
    // sizes = concat(shape(X)[0:2], (h, w)): N and C stay whatever the input's are (a dynamic batch)
    const Shape& o = cx.output_shape();
    const std::string shape = cx.node1("Shape", {cx.input(0).name}, cx.fresh("shape"));
    const std::string lead = cx.node1(
        "Slice", {shape, cx.graph().ints({0}, "starts"), cx.graph().ints({2}, "ends")}, cx.fresh("lead"));
    in.push_back("");
    in.push_back(cx.node1("Concat", {lead, cx.graph().ints({o[2], o[3]}, "hw")}, cx.fresh("sizes"),
                          {{"axis", std::int64_t{0}}}));
  }
  cx.node("Resize", in, {cx.output()}, attributes);
}


/// The ONNX coordinate rules that equal PyTorch's on the given extents (in -> out of one axis).
struct onnx_resize_axis {
  std::int64_t in = 0, out = 0;
  double scale = 0;  ///< Resize's scale of the axis: the given one, else out / in
};

/// Resize (opset 11 to 17; Resize-10 and Upsample-9 without roi: inputs X, scales) and Upsample
/// become interpolate where their attributes mean PyTorch's rule: nearest with asymmetric
/// coordinates and floor rounding (Upsample's and Resize-10's only nearest), or with half-pixel
/// coordinates and round_prefer_floor/ceil when every scale is a whole factor >= 1 (where both pick
/// the same pixel); linear with half_pixel, with pytorch_half_pixel on output extents above 1, or
/// with align_corners. Scales equal on H and W (and 1 on N and C) import as a scale_factor, others
/// as the output size where they give whole extents (as align_corners needs).
inline void interpolate_fn::onnx_import(onnx_import_context& cx) {
  const onnx_value x = cx.tensor(0);
  const Shape& s = cx.shape(x);
  if (s.rank() != 4) cx.unsupported("an input of shape " + s.to_string() + " (interpolate resizes NCHW tensors)");
  const bool upsample = cx.op_type() == "Upsample" || cx.opset() < 11;
  const int scales_input = upsample ? 1 : 2;
  std::vector<double> scales;
  std::vector<std::int64_t> sizes;
  if (cx.has_input(scales_input)) scales = cx.numbers(scales_input, "scales");
  if (!upsample && scales.empty() && cx.has_input(3)) sizes = cx.integers(3, "sizes");
  if (scales.empty() == sizes.empty())
    cx.unsupported("exactly one of scales and sizes must be given and non-empty");
  if (!scales.empty() && scales.size() != 4) cx.unsupported("scales " + std::to_string(scales.size()) + " values for a rank-4 input");
  if (!sizes.empty() && sizes.size() != 4) cx.unsupported("sizes " + ints_repr(sizes) + " for a rank-4 input");
  std::array<onnx_resize_axis, 4> axes;
  for (std::size_t a = 0; a < 4; ++a) {
    axes[a].in = s[a];
    if (!scales.empty()) {
      axes[a].scale = scales[a];
      axes[a].out = static_cast<std::int64_t>(std::floor(static_cast<double>(s[a]) * scales[a]));
    } else {
      axes[a].out = sizes[a];
      axes[a].scale = static_cast<double>(sizes[a]) / static_cast<double>(s[a]);
    }
  }
  if (axes[0].out != s[0] || axes[1].out != s[1])
    cx.unsupported("a resize of N or C (input " + s.to_string() + ", output (" + std::to_string(axes[0].out) + ", " +
                   std::to_string(axes[1].out) + ", ...))");

  const std::string mode = cx.attr_string("mode", "nearest");
  const std::string coordinates =
      upsample ? std::string("asymmetric") : cx.attr_string("coordinate_transformation_mode", "half_pixel");
  params p;
  if (mode == "nearest") {
    const std::string rounding = upsample ? std::string("floor") : cx.attr_string("nearest_mode", "round_prefer_floor");
    const auto whole = [](const onnx_resize_axis& a) {
      return a.out >= a.in && a.out % a.in == 0 && a.scale == static_cast<double>(a.out / a.in);
    };
    const bool floor_asymmetric = coordinates == "asymmetric" && rounding == "floor";
    const bool whole_half_pixel = (coordinates == "half_pixel" || coordinates == "pytorch_half_pixel") &&
                                  (rounding == "round_prefer_floor" || rounding == "round_prefer_ceil") &&
                                  whole(axes[2]) && whole(axes[3]);
    if (!floor_asymmetric && !whole_half_pixel)
      cx.unsupported("mode nearest with coordinate_transformation_mode '" + coordinates + "' and nearest_mode '" + rounding +
                     "' (PyTorch's nearest is asymmetric with floor, or half_pixel when each factor is a whole number)");
  } else if (mode == "linear") {
    p.mode = "bilinear";
    if (coordinates == "align_corners") {
      p.align_corners = true;
    } else if (coordinates == "pytorch_half_pixel" && (axes[2].out == 1 || axes[3].out == 1)) {
      cx.unsupported("mode linear with coordinate_transformation_mode 'pytorch_half_pixel' on an output extent of 1 "
                     "(it reads pixel 0 there, PyTorch's kernel the half-pixel centre)");
    } else if (coordinates != "half_pixel" && coordinates != "pytorch_half_pixel") {
      cx.unsupported("mode linear with coordinate_transformation_mode '" + coordinates +
                     "' (supported: half_pixel, pytorch_half_pixel, align_corners)");
    }
  } else {
    cx.unsupported("attribute mode '" + mode + "' (supported: nearest, linear)");
  }
  // Where a scale gives an extent that is not whole, ONNX's coordinates use the scale itself (and
  // align_corners the unrounded extent), PyTorch's the scale factor: only one factor carries over.
  const auto exact = [](const onnx_resize_axis& a) {
    return static_cast<double>(a.in) * a.scale == static_cast<double>(a.out);
  };
  const bool exact_hw = scales.empty() || (exact(axes[2]) && exact(axes[3]));
  if (p.align_corners && !exact_hw)
    cx.unsupported("coordinate_transformation_mode 'align_corners' with scales that do not give whole extents (" +
                   s.to_string() + " scaled by " + repr(axes[2].scale) + ", " + repr(axes[3].scale) + ")");
  if (!scales.empty() && axes[2].scale == axes[3].scale) {
    p.scale_factor = axes[2].scale;
  } else {
    if (!exact_hw)
      cx.unsupported("scales " + repr(axes[2].scale) + " and " + repr(axes[3].scale) + " on H and W of " + s.to_string() +
                     " (interpolate takes one scale factor, and these do not give whole extents)");
    p.size = pair2{axes[2].out, axes[3].out};
  }
  cx.bind(cx.call<interpolate_fn>(p, x));
}

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
