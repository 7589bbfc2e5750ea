// layer_norm and group_norm: PyTorch's F.layer_norm and F.group_norm. Both normalise groups of
// elements by their mean and biased variance, y = (x - mean) / sqrt(var + eps), then scale and shift
// by an optional weight and bias. layer_norm's groups are the trailing len(normalized_shape) axes
// (weight and bias have normalized_shape); group_norm splits the channels of (N, C, ...) into
// num_groups groups, each normalised over its channels and spatial positions (weight and bias are
// (C,)). ONNX: layer_norm exports as LayerNormalization from opset 17 on and as its ReduceMean, Sub,
// Mul, Add, Sqrt, Div chain below; LayerNormalization imports. group_norm exports as that chain over
// x reshaped to (N, num_groups, -1); ONNX's GroupNormalization (opset 18) is beyond the exporter's
// opsets and is not imported.
#pragma once

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/layer_norm.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace tracemod::functional {

namespace detail {

/// eps must be a non-negative number (NaN is not).
constexpr void check_norm_eps(std::string_view target, double eps) {
  if (!(eps >= 0)) throw value_error(std::string(target) + ": eps " + repr(eps) + " must be non-negative");
}

/// The float data of an optional operand (null for tmod::none), checked to be float32.
template <class T>
const float* optional_data(std::string_view target, std::string_view arg, const T& t) {
  if constexpr (std::same_as<T, none_t>) {
    return nullptr;
  } else {
    require_float32(target, arg, t);
    return t.template data<float>();
  }
}
template <class T>
std::optional<Shape> optional_shape(const T& t) {
  if constexpr (std::same_as<T, none_t>)
    return std::nullopt;
  else
    return t.shape();
}
inline const Shape* shape_ptr(const std::optional<Shape>& s) { return s ? &*s : nullptr; }

/// A normalisation's weight and bias data (null where absent), after checking x is float32 and the
/// shapes are as Op::infer_shape wants them.
struct affine_data {
  const float* weight;
  const float* bias;
};
template <class Op, class W, class B>
affine_data checked_affine(const typename Op::params& p, const Tensor& x, const W& weight, const B& bias) {
  require_float32(Op::target, "inp", x);
  const affine_data data{optional_data(Op::target, "weight", weight), optional_data(Op::target, "bias", bias)};
  const std::optional<Shape> sw = optional_shape(weight), sb = optional_shape(bias);
  Op::infer_shape(p, x.shape(), shape_ptr(sw), shape_ptr(sb));
  return data;
}

/// Mean, variance and normalisation: five operations per element, two more with weight and bias.
constexpr op_cost norm_cost(const Shape& out, const Shape* weight, const Shape* bias) {
  return flop_cost((5 + (weight ? 1 : 0) + (bias ? 1 : 0)) * out.numel());
}

/// The ONNX values of a normalisation over the axes `axes` of `x` (ReduceMean takes its axes as an
/// attribute in the exporter's opsets, 13 to 17): x - mean, the mean and sqrt(var + eps), each
/// with the reduced axes kept.
struct onnx_moments {
  std::string centered, mean, std_dev;
};
inline onnx_moments onnx_normalize_parts(onnx_export_context& cx, const std::string& x, const std::vector<std::int64_t>& axes,
                                         double eps, const std::string& base) {
  const std::vector<onnx_attribute> reduce{{"axes", axes}, {"keepdims", std::int64_t{1}}};
  onnx_moments m;
  m.mean = cx.node1("ReduceMean", {x}, cx.fresh(base + "_mean"), reduce);
  m.centered = cx.node1("Sub", {x, m.mean}, cx.fresh(base + "_centered"));
  const std::string square = cx.node1("Mul", {m.centered, m.centered}, cx.fresh(base + "_square"));
  const std::string var = cx.node1("ReduceMean", {square}, cx.fresh(base + "_var"), reduce);
  const std::string shifted = cx.node1("Add", {var, cx.graph().scalar(eps)}, cx.fresh(base + "_var_eps"));
  m.std_dev = cx.node1("Sqrt", {shifted}, cx.fresh(base + "_std"));
  return m;
}

/// The value name the normalised x gets: the call's output itself when no weight or bias follows.
inline std::string onnx_normalized_name(onnx_export_context& cx) {
  return cx.input(1).is_tensor() || cx.input(2).is_tensor() ? cx.fresh(cx.output() + "_normalized") : cx.output();
}

/// Multiplies `in` by the optional weight and adds the optional bias (each an ONNX value name, or
/// nullopt), the last node writing `out`; with neither, `in` is `out` already (onnx_normalized_name).
inline void onnx_affine(onnx_export_context& cx, const std::string& in, const std::optional<std::string>& weight,
                        const std::optional<std::string>& bias, const std::string& out) {
  std::string v = in;
  if (weight) v = cx.node1("Mul", {v, *weight}, bias ? cx.fresh(out + "_scaled") : out);
  if (bias) cx.node("Add", {v, *bias}, {out});
}

}  // namespace detail

struct layer_norm_params {
  int_list normalized_shape;  ///< the trailing dims normalised together
  double eps = 1e-5;
};

/// Normalises over the trailing len(normalized_shape) axes, as PyTorch's F.layer_norm.
struct layer_norm_fn : op_base<layer_norm_fn> {
  static constexpr std::string_view name = "layer_norm";
  static constexpr std::string_view target = "nn.layer_norm";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}, operand{"weight", operand_kind::optional_tensor},
                                       operand{"bias", operand_kind::optional_tensor}};
  using params = layer_norm_params;
  static constexpr std::tuple fields{required("normalized_shape", &params::normalized_shape), positional("eps", &params::eps)};

  static constexpr Shape infer_shape(const params& p, const Shape& x, const Shape* weight, const Shape* bias) {
    detail::check_norm_eps(target, p.eps);
    const std::size_t k = p.normalized_shape.size();
    if (k == 0) throw value_error(std::string(target) + ": normalized_shape () names no axis (input " + x.to_string() + ")");
    bool fits = k <= x.rank();
    for (std::size_t i = 0; fits && i < k; ++i) fits = x[x.rank() - k + i] == p.normalized_shape[i];
    if (!fits)
      throw shape_error(std::string(target) + ": normalized_shape " + repr(p.normalized_shape) +
                        " is not the trailing dims of input " + x.to_string());
    Shape normalized;
    for (std::int64_t d : p.normalized_shape) normalized.push_back(d);
    const std::array<std::pair<std::string_view, const Shape*>, 2> affine{{{"weight", weight}, {"bias", bias}}};
    for (const auto& [arg, s] : affine)
      if (s && *s != normalized)
        throw shape_error(std::string(target) + ": " + std::string(arg) + " " + s->to_string() + " must have normalized_shape " +
                          normalized.to_string() + " (input " + x.to_string() + ")");
    return x;
  }
  /// The normalised dims are static (checked against the example shapes); the others pass through.
  static Dims infer_dims(const params&, const ShapeDims& x, const ShapeDims*, const ShapeDims*) { return x.dims; }
  static constexpr op_cost cost(const params&, const Shape& out, const Shape&, const Shape* weight, const Shape* bias) {
    return detail::norm_cost(out, weight, bias);
  }

  template <class W, class B>
  static Tensor eager(const params& p, const Tensor& x, const W& weight, const B& bias) {
    const auto [w, b] = detail::checked_affine<layer_norm_fn>(p, x, weight, bias);
    std::int64_t len = 1;
    for (std::int64_t d : p.normalized_shape) len *= d;
    Tensor y = Tensor::empty(x.shape(), DType::float32, target);
    const std::int64_t rows = len == 0 ? 0 : x.numel() / len;
    kernels::normalize_rows(x.data<float>(), y.data<float>(), rows, len, 1, 1, w, b, p.eps);
    return y;
  }

  /// PyTorch's order: F::layer_norm(x, normalized_shape, weight, bias, eps).
  template <class X, class W = none_t, class B = none_t>
  decltype(auto) operator()(const X& x, const int_list& normalized_shape, const W& weight = none, const B& bias = none,
                            double eps = 1e-5) const {
    return apply(params{normalized_shape, eps}, x, weight, bias);
  }

  /// LayerNormalization from opset 17 on (its Scale is required: ones for a call without weight),
  /// below it the chain of nodes it stands for.
  static void onnx_export(onnx_export_context& cx, const params& p) {
    const Shape& x = cx.input(0).shape;
    const std::size_t k = p.normalized_shape.size();
    const auto axis = static_cast<std::int64_t>(x.rank() - k);
    if (cx.graph().opset() >= 17) {
      Shape normalized;
      for (std::int64_t d : p.normalized_shape) normalized.push_back(d);
      std::vector<std::string> in{cx.input(0).name, cx.input(1).is_tensor()
                                                        ? cx.input(1).name
                                                        : cx.graph().initializer(ones(normalized), "layer_norm_scale")};
      if (cx.input(2).is_tensor()) in.push_back(cx.input(2).name);
      cx.node("LayerNormalization", in, {cx.output()}, {{"axis", axis}, {"epsilon", p.eps}});
      return;
    }
    std::vector<std::int64_t> axes;
    for (auto a = axis; a < static_cast<std::int64_t>(x.rank()); ++a) axes.push_back(a);
    const detail::onnx_moments m = detail::onnx_normalize_parts(cx, cx.input(0).name, axes, p.eps, cx.output());
    const std::string normalized = cx.node1("Div", {m.centered, m.std_dev}, detail::onnx_normalized_name(cx));
    detail::onnx_affine(cx, normalized, cx.optional_name(cx.input(1)), cx.optional_name(cx.input(2)), cx.output());
  }
  static constexpr std::array onnx_import_types{std::string_view("LayerNormalization")};
  static constexpr std::array onnx_import_attributes{std::string_view("axis"), std::string_view("epsilon"),
                                                     std::string_view("stash_type")};
  /// Scale and B have the shape of x's axes from `axis` on; Mean and InvStdDev are not computed.
  static void onnx_import(onnx_import_context& cx) {
    if (cx.attr_int("stash_type", 1) != 1)
      cx.unsupported("stash_type " + std::to_string(cx.attr_int("stash_type", 1)) + " (only 1: statistics in float)");
    cx.only_first_output("the mean and inverse standard deviation");
    const onnx_value x = cx.tensor(0);
    const Shape& s = cx.shape(x);
    const auto rank = static_cast<std::int64_t>(s.rank());
    const std::int64_t a = cx.attr_int("axis", -1);
    if (a < -rank || a >= rank)
      cx.unsupported("axis " + std::to_string(a) + " for an input of shape " + s.to_string());
    int_list normalized;
    for (std::int64_t i = a < 0 ? a + rank : a; i < rank; ++i) normalized.push_back(s[static_cast<std::size_t>(i)]);
    cx.bind(cx.call<layer_norm_fn>({normalized, cx.attr_float("epsilon", 1e-5f)}, x, cx.tensor(1), cx.optional(2)));
  }
};
inline constexpr layer_norm_fn layer_norm{};
TRACEMOD_REGISTER_BUILTIN_OP(layer_norm_fn);

struct group_norm_params {
  std::int64_t num_groups = 1;  ///< must divide the channels
  double eps = 1e-5;
};

/// Normalises each group of channels of (N, C, ...) over its channels and positions, as PyTorch's
/// F.group_norm.
struct group_norm_fn : op_base<group_norm_fn> {
  static constexpr std::string_view name = "group_norm";
  static constexpr std::string_view target = "nn.group_norm";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}, operand{"weight", operand_kind::optional_tensor},
                                       operand{"bias", operand_kind::optional_tensor}};
  using params = group_norm_params;
  static constexpr std::tuple fields{required("num_groups", &params::num_groups), positional("eps", &params::eps)};

  static constexpr Shape infer_shape(const params& p, const Shape& x, const Shape* weight, const Shape* bias) {
    detail::check_norm_eps(target, p.eps);
    if (p.num_groups <= 0)
      throw value_error(std::string(target) + ": num_groups " + std::to_string(p.num_groups) + " must be positive");
    if (x.rank() < 2) throw shape_error(std::string(target) + ": input " + x.to_string() + " must have rank >= 2 (N, C, ...)");
    if (x[1] % p.num_groups != 0)
      throw shape_error(std::string(target) + ": the " + std::to_string(x[1]) + " channels of input " + x.to_string() +
                        " do not divide into num_groups " + std::to_string(p.num_groups));
    const std::array<std::pair<std::string_view, const Shape*>, 2> affine{{{"weight", weight}, {"bias", bias}}};
    for (const auto& [arg, s] : affine)
      if (s && !(s->rank() == 1 && (*s)[0] == x[1]))
        throw shape_error(std::string(target) + ": " + std::string(arg) + " " + s->to_string() + " must be (" +
                          std::to_string(x[1]) + ",) for input " + x.to_string());
    return x;
  }
  static Dims infer_dims(const params&, const ShapeDims& x, const ShapeDims*, const ShapeDims*) { return x.dims; }
  static constexpr op_cost cost(const params&, const Shape& out, const Shape&, const Shape* weight, const Shape* bias) {
    return detail::norm_cost(out, weight, bias);
  }

  template <class W, class B>
  static Tensor eager(const params& p, const Tensor& x, const W& weight, const B& bias) {
    const auto [w, b] = detail::checked_affine<group_norm_fn>(p, x, weight, bias);
    const Shape& s = x.shape();
    std::int64_t inner = 1;
    for (std::size_t i = 2; i < s.rank(); ++i) inner *= s[i];
    Tensor y = Tensor::empty(s, DType::float32, target);
    kernels::normalize_rows(x.data<float>(), y.data<float>(), s[0] * p.num_groups, s[1] / p.num_groups, inner,
                            p.num_groups, w, b, p.eps);
    return y;
  }

  /// PyTorch's order: F::group_norm(x, num_groups, weight, bias, eps).
  template <class X, class W = none_t, class B = none_t>
  decltype(auto) operator()(const X& x, std::int64_t num_groups, const W& weight = none, const B& bias = none,
                            double eps = 1e-5) const {
    return apply(params{num_groups, eps}, x, weight, bias);
  }

  /// The statistics of x reshaped to (N, num_groups, -1), spread to each channel of its group and
  /// reshaped to (N, C, 1, ...), normalise x in its own shape (only N is read from x, so dynamic
  /// dims stay dynamic); weight and bias are reshaped to (C, 1, ...).
  static void onnx_export(onnx_export_context& cx, const params& p) {
    const Shape& x = cx.input(0).shape;
    const std::string out = cx.output();
    const std::int64_t per_group = x[1] / p.num_groups;
    const std::string grouped = cx.node1("Reshape", {cx.input(0).name, cx.graph().ints({0, p.num_groups, -1}, "group_shape")},
                                         cx.fresh(out + "_grouped"));
    const detail::onnx_moments m = detail::onnx_normalize_parts(cx, grouped, {2}, p.eps, out);
    std::vector<std::int64_t> stat_shape(x.rank(), 1), channel_shape(x.rank() - 1, 1);
    stat_shape[0] = 0;  // N, copied from the statistics
    stat_shape[1] = channel_shape[0] = x[1];
    const std::string ones_per_group =
        per_group == 1 ? std::string() : cx.graph().initializer(ones(Shape{1, 1, per_group}), "group_ones");
    const auto per_channel = [&](const std::string& stat) {
      const std::string spread = per_group == 1 ? stat : cx.node1("Mul", {stat, ones_per_group}, cx.fresh(stat + "_spread"));
      return cx.node1("Reshape", {spread, cx.graph().ints(stat_shape, "stat_shape")}, cx.fresh(stat + "_channels"));
    };
    const std::string centered = cx.node1("Sub", {cx.input(0).name, per_channel(m.mean)}, cx.fresh(out + "_x_centered"));
    const std::string normalized = cx.node1("Div", {centered, per_channel(m.std_dev)}, detail::onnx_normalized_name(cx));
    const auto channel_view = [&](std::size_t i) -> std::optional<std::string> {
      if (!cx.input(i).is_tensor()) return std::nullopt;
      return cx.node1("Reshape", {cx.input(i).name, cx.graph().ints(channel_shape, "channel_shape")},
                      cx.fresh(out + (i == 1 ? "_weight" : "_bias")));
    };
    const std::optional<std::string> weight = channel_view(1), bias = channel_view(2);
    detail::onnx_affine(cx, normalized, weight, bias, out);
  }
};
inline constexpr group_norm_fn group_norm{};
TRACEMOD_REGISTER_BUILTIN_OP(group_norm_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
