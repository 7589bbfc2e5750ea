// The activations beyond relu and sigmoid, with PyTorch's names and defaults: silu, hardsigmoid,
// hardswish, leaky_relu (negative_slope = 0.01; ONNX's PRelu imports as it), elu, celu, selu,
// thresholded_relu (ONNX's ThresholdedRelu), gelu (approximate "none", the erf form, or "tanh"), and
// erf, which the ONNX form of the exact gelu needs. Each has its kernel
// and its ONNX rule (opset 13 to 17, which have no Gelu and no HardSwish before 14: gelu exports
// as its formula, hardswish as x * HardSigmoid(x)).
#pragma once

#include <tracemod/functional/elementwise.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace tracemod::kernels {

/// x * sigmoid(x).
struct silu_op {
  static constexpr std::string_view name = "silu";
  fbatch operator()(const fbatch& x) const noexcept { return x * detail::sigmoid(x); }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

/// min(max(x + 3, 0), 6) / 6, as PyTorch computes it.
struct hardsigmoid_op {
  static constexpr std::string_view name = "hardsigmoid";
  fbatch operator()(const fbatch& x) const noexcept { return detail::relu6(x + fbatch(3.0f)) / fbatch(6.0f); }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

/// x * min(max(x + 3, 0), 6) / 6, as PyTorch computes it.
struct hardswish_op {
  static constexpr std::string_view name = "hardswish";
  fbatch operator()(const fbatch& x) const noexcept { return x * detail::relu6(x + fbatch(3.0f)) / fbatch(6.0f); }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

/// x > 0 ? x : x * slope (NaN stays NaN).
struct leaky_relu_op {
  static constexpr std::string_view name = "leaky_relu";
  fbatch operator()(const fbatch& x, const fbatch& slope) const noexcept {
    return xsimd::select(x > fbatch(0.0f), x, x * slope);
  }
  float operator()(float x, float slope) const noexcept { return detail::on_one_lane(*this, x, slope); }
};

/// x > 0 ? x : alpha * (exp(x) - 1) (expm1: exact near 0).
struct elu_op {
  static constexpr std::string_view name = "elu";
  fbatch operator()(const fbatch& x, const fbatch& alpha) const noexcept {
    return xsimd::select(x > fbatch(0.0f), x, alpha * xsimd::expm1(x));
  }
  float operator()(float x, float alpha) const noexcept { return detail::on_one_lane(*this, x, alpha); }
};

/// x > 0 ? x : alpha * (exp(x / alpha) - 1).
struct celu_op {
  static constexpr std::string_view name = "celu";
  fbatch operator()(const fbatch& x, const fbatch& alpha) const noexcept {
    return xsimd::select(x > fbatch(0.0f), x, alpha * xsimd::expm1(x / alpha));
  }
  float operator()(float x, float alpha) const noexcept { return detail::on_one_lane(*this, x, alpha); }
};

/// x > alpha ? x : 0.
struct thresholded_relu_op {
  static constexpr std::string_view name = "thresholded_relu";
  fbatch operator()(const fbatch& x, const fbatch& alpha) const noexcept {
    return xsimd::select(x > alpha, x, fbatch(0.0f));
  }
  float operator()(float x, float alpha) const noexcept { return detail::on_one_lane(*this, x, alpha); }
};

/// scale * elu(x, alpha) with PyTorch's (and ONNX Selu's default) constants, as float32.
struct selu_op {
  static constexpr std::string_view name = "selu";
  static constexpr float alpha = 1.67326319217681884765625f;
  static constexpr float scale = 1.05070102214813232421875f;
  fbatch operator()(const fbatch& x) const noexcept { return fbatch(scale) * elu_op{}(x, fbatch(alpha)); }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

/// The error function: xsimd's vector erf (a few ulps from the correctly rounded value); a single
/// element takes the same path, so a tail has the bits of a full vector.
struct erf_op {
  static constexpr std::string_view name = "erf";
  fbatch operator()(const fbatch& a) const noexcept { return xsimd::erf(a); }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

/// gelu in double precision, rounded once: x/2 (1 + erf(x / sqrt 2)), or with `tanh`
/// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline float gelu(float xf, bool tanh_form) noexcept {
  const double x = xf;
  if (tanh_form) {
    constexpr double k = 0.79788456080286535588;  // sqrt(2 / pi)
    return static_cast<float>(0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))));
  }
  return static_cast<float>(0.5 * x * (1.0 + std::erf(x * 0.70710678118654752440)));
}

}  // namespace tracemod::kernels

namespace tracemod::functional {

namespace detail {
template <>
struct onnx_of<kernels::erf_op> {
  static constexpr std::array types{std::string_view("Erf")};
};
}  // namespace detail

/// x * sigmoid(x) (PyTorch's F.silu); exported as Mul(x, Sigmoid(x)).
struct silu_fn : unary_op<silu_fn, kernels::silu_op> {
  static constexpr std::string_view name = "silu";
  static constexpr std::string_view target = "nn.silu";
  static constexpr call_kind kind = call_kind::function;

  static void onnx_export(onnx_export_context& cx, const params&) {
    const std::string& x = cx.input(0).name;
    const std::string s = cx.node1("Sigmoid", {x}, cx.fresh(cx.output() + "_sigmoid"));
    cx.node("Mul", {x, s}, {cx.output()});
  }
};
inline constexpr silu_fn silu{};
TRACEMOD_REGISTER_BUILTIN_OP(silu_fn);

/// relu6(x + 3) / 6 (PyTorch's F.hardsigmoid); ONNX's HardSigmoid(alpha = 1/6, beta = 1/2) both ways.
/// A HardSigmoid with other alpha and beta imports as max(0, min(1, alpha * x + beta)).
struct hardsigmoid_fn : unary_op<hardsigmoid_fn, kernels::hardsigmoid_op> {
  static constexpr std::string_view name = "hardsigmoid";
  static constexpr std::string_view target = "nn.hardsigmoid";
  static constexpr call_kind kind = call_kind::function;

  static void onnx_export(onnx_export_context& cx, const params&) {
    cx.node("HardSigmoid", {cx.input(0).name}, {cx.output()}, {{"alpha", 1.0 / 6.0}, {"beta", 0.5}});
  }
  static constexpr std::array onnx_import_types{std::string_view("HardSigmoid")};
  static constexpr std::array onnx_import_attributes{std::string_view("alpha"), std::string_view("beta")};
  static void onnx_import(onnx_import_context& cx) {
    const float alpha = static_cast<float>(cx.attr_float("alpha", 0.2f));
    const float beta = static_cast<float>(cx.attr_float("beta", 0.5f));
    const onnx_value x = cx.tensor(0);
    if (alpha != static_cast<float>(1.0 / 6.0) || beta != 0.5f) {  // max(0, min(1, alpha * x + beta))
      const onnx_value y = cx.call<add_fn>({}, cx.call<mul_fn>({}, x, Value(static_cast<double>(alpha))), Value(static_cast<double>(beta)));
      return cx.bind(cx.call<maximum_fn>({}, cx.call<minimum_fn>({}, y, Value(1.0)), Value(0.0)));
    }
    cx.bind(cx.call<hardsigmoid_fn>({}, x));
  }
};
inline constexpr hardsigmoid_fn hardsigmoid{};
TRACEMOD_REGISTER_BUILTIN_OP(hardsigmoid_fn);

/// x * relu6(x + 3) / 6 (PyTorch's F.hardswish); exported as Mul(x, HardSigmoid(x)) (HardSwish is
/// opset 14), and ONNX's HardSwish imports as it.
struct hardswish_fn : unary_op<hardswish_fn, kernels::hardswish_op> {
  static constexpr std::string_view name = "hardswish";
  static constexpr std::string_view target = "nn.hardswish";
  static constexpr call_kind kind = call_kind::function;

  static void onnx_export(onnx_export_context& cx, const params&) {
    const std::string& x = cx.input(0).name;
    const std::string s =
        cx.node1("HardSigmoid", {x}, cx.fresh(cx.output() + "_hardsigmoid"), {{"alpha", 1.0 / 6.0}, {"beta", 0.5}});
    cx.node("Mul", {x, s}, {cx.output()});
  }
  static constexpr std::array onnx_import_types{std::string_view("HardSwish")};
  static void onnx_import(onnx_import_context& cx) { cx.bind(cx.call<hardswish_fn>({}, cx.tensor(0))); }
};
inline constexpr hardswish_fn hardswish{};
TRACEMOD_REGISTER_BUILTIN_OP(hardswish_fn);

/// x > 0 ? x : x * negative_slope (PyTorch's F.leaky_relu; negative_slope defaults to 0.01). The
/// slope is an operand, a number (or a tensor broadcasting with x), so a fused program carries it
/// as a constant. A number exports as LeakyRelu(alpha), a tensor as PRelu.
struct leaky_relu_fn : broadcast_binary<leaky_relu_fn, kernels::leaky_relu_op, false> {
  static constexpr std::string_view name = "leaky_relu";
  static constexpr std::string_view target = "nn.leaky_relu";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor},
                                       operand{"negative_slope", operand_kind::tensor_or_scalar}};
  static constexpr double default_slope = 0.01;

  using op_base<leaky_relu_fn>::operator();
  /// leaky_relu(x) with PyTorch's default slope.
  template <class X>
  decltype(auto) operator()(const X& x) const {
    return (*this)(x, default_slope);
  }

  static void onnx_export(onnx_export_context& cx, const params&) {
    const onnx_operand& slope = cx.input(1);
    if (slope.kind == onnx_operand::Kind::scalar)
      return cx.node("LeakyRelu", {cx.input(0).name}, {cx.output()}, {{"alpha", slope.scalar}});
    if (cx.output_shape() != cx.input(0).shape)
      cx.refuse("a slope tensor of shape " + slope.shape.to_string() + " widens the input of shape " +
                cx.input(0).shape.to_string() + " (PRelu broadcasts the slope to the input only)");
    cx.node("PRelu", {cx.input(0).name, slope.name}, {cx.output()});
  }
  /// LeakyRelu (alpha, 0.01 by default) and PRelu, whose slope tensor broadcasts to the input.
  static std::vector<onnx_import_rule> onnx_imports() {
    return {{"LeakyRelu", {"alpha"}, {}, &onnx_import_leaky}, {"PRelu", {}, {}, &onnx_import_prelu}};
  }
  static void onnx_import_leaky(onnx_import_context& cx) {
    cx.bind(cx.call<leaky_relu_fn>({}, cx.tensor(0), Value(cx.attr_float("alpha", 0.01f))));
  }
  static void onnx_import_prelu(onnx_import_context& cx) {
    const onnx_value x = cx.tensor(0), slope = cx.tensor(1);
    const Shape &xs = cx.shape(x), &ss = cx.shape(slope);
    if (broadcast_shapes(xs, ss, "PRelu") != xs)
      cx.unsupported("a slope of shape " + ss.to_string() + " widens the input of shape " + xs.to_string());
    cx.bind(cx.call<leaky_relu_fn>({}, x, slope));
  }
};
inline constexpr leaky_relu_fn leaky_relu{};
TRACEMOD_REGISTER_BUILTIN_OP(leaky_relu_fn);

namespace detail {

/// An activation with one float parameter `alpha` that is an operand (a number, or a tensor
/// broadcasting with x), as leaky_relu's slope, so a fused program carries it as a constant:
/// Derived(x) takes Derived::default_alpha. ONNX: the node type Derived::onnx_type with attribute
/// alpha both ways (an alpha tensor has no ONNX form).
template <class Derived, class KernelOp>
struct alpha_activation : broadcast_binary<Derived, KernelOp, false> {
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}, operand{"alpha", operand_kind::tensor_or_scalar}};

  using op_base<Derived>::operator();
  /// Derived(x, default_alpha).
  template <class X>
  decltype(auto) operator()(const X& x) const {
    return static_cast<const Derived&>(*this)(x, Derived::default_alpha);
  }

  static void onnx_export(onnx_export_context& cx, const no_params&) {
    const onnx_operand& alpha = cx.input(1);
    if (alpha.kind != onnx_operand::Kind::scalar)
      cx.refuse("alpha is a tensor of shape " + alpha.shape.to_string() + " (" + std::string(Derived::onnx_type) +
                "'s alpha is one number)");
    cx.node(std::string(Derived::onnx_type), {cx.input(0).name}, {cx.output()}, {{"alpha", alpha.scalar}});
  }
  static std::vector<onnx_import_rule> onnx_imports() {
    return {{std::string(Derived::onnx_type), {"alpha"}, {}, &onnx_import}};
  }
  static void onnx_import(onnx_import_context& cx) {
    const double alpha = cx.attr_float("alpha", static_cast<float>(Derived::default_alpha));
    cx.bind(cx.call<Derived>({}, cx.tensor(0), Value(alpha)));
  }
};

}  // namespace detail

#define TRACEMOD_DEFINE_ALPHA_ACTIVATION(op_name, onnx)                                  \
  struct op_name##_fn : detail::alpha_activation<op_name##_fn, kernels::op_name##_op> {  \
    static constexpr std::string_view name = #op_name;                                  \
    static constexpr std::string_view target = "nn." #op_name;                          \
    static constexpr std::string_view onnx_type = onnx;                                 \
    static constexpr double default_alpha = 1.0;                                        \
  };                                                                                     \
  inline constexpr op_name##_fn op_name{};                                               \
  TRACEMOD_REGISTER_BUILTIN_OP(op_name##_fn);

// x > 0 ? x : alpha * (exp(x) - 1) (PyTorch's F.elu, alpha = 1); ONNX's Elu.
TRACEMOD_DEFINE_ALPHA_ACTIVATION(elu, "Elu")
// x > 0 ? x : alpha * (exp(x / alpha) - 1) (PyTorch's F.celu, alpha = 1); ONNX's Celu.
TRACEMOD_DEFINE_ALPHA_ACTIVATION(celu, "Celu")
// x > alpha ? x : 0 (alpha = 1, ONNX's default; PyTorch's F.threshold(x, alpha, 0)); ONNX's ThresholdedRelu.
TRACEMOD_DEFINE_ALPHA_ACTIVATION(thresholded_relu, "ThresholdedRelu")
#undef TRACEMOD_DEFINE_ALPHA_ACTIVATION

/// scale * elu(x, alpha) with PyTorch's constants (F.selu); ONNX's Selu with its default alpha and
/// gamma both ways, and with others as gamma * elu(x, alpha).
struct selu_fn : unary_op<selu_fn, kernels::selu_op> {
  static constexpr std::string_view name = "selu";
  static constexpr std::string_view target = "nn.selu";
  static constexpr call_kind kind = call_kind::function;

  static void onnx_export(onnx_export_context& cx, const params&) { cx.node("Selu", {cx.input(0).name}, {cx.output()}); }
  static constexpr std::array onnx_import_types{std::string_view("Selu")};
  static constexpr std::array onnx_import_attributes{std::string_view("alpha"), std::string_view("gamma")};
  static void onnx_import(onnx_import_context& cx) {
    const double alpha = cx.attr_float("alpha", kernels::selu_op::alpha);
    const double gamma = cx.attr_float("gamma", kernels::selu_op::scale);
    const onnx_value x = cx.tensor(0);
    if (alpha == kernels::selu_op::alpha && gamma == kernels::selu_op::scale) return cx.bind(cx.call<selu_fn>({}, x));
    cx.bind(cx.call<mul_fn>({}, cx.call<elu_fn>({}, x, Value(alpha)), Value(gamma)));
  }
};
inline constexpr selu_fn selu{};
TRACEMOD_REGISTER_BUILTIN_OP(selu_fn);

/// erf(x) (torch.erf); ONNX's Erf both ways.
struct erf_fn : unary_op<erf_fn, kernels::erf_op> {
  static constexpr std::string_view name = "erf";
  static constexpr std::string_view target = "elemwise.erf";
  static constexpr call_kind kind = call_kind::function;
};
inline constexpr erf_fn erf{};
TRACEMOD_REGISTER_BUILTIN_OP(erf_fn);

struct gelu_params {
  std::string approximate = "none";  ///< "none": x/2 (1 + erf(x / sqrt 2)); "tanh": the tanh form
};

/// PyTorch's F.gelu(x, approximate = "none" | "tanh"), computed in double and rounded once.
/// Elementwise (symbolic dims broadcast through the registry) but not fused: a fused program calls
/// kernels without params. Exported as its formula over Erf or Tanh (ONNX has Gelu from opset 20
/// only), which imports as the elementwise ops of the formula.
struct gelu_fn : op_base<gelu_fn> {
  static constexpr std::string_view name = "gelu";
  static constexpr std::string_view target = "nn.gelu";
  static constexpr call_kind kind = call_kind::function;
  static constexpr bool elementwise = true;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = gelu_params;
  static constexpr std::tuple fields{keyword("approximate", &params::approximate)};

  static bool tanh_form(const params& p) {
    if (p.approximate == "none") return false;
    if (p.approximate == "tanh") return true;
    throw value_error(std::string(target) + ": approximate is '" + p.approximate + "' (supported: none, tanh)");
  }
  static Shape infer_shape(const params& p, const Shape& x) {
    (void)tanh_form(p);
    return x;
  }
  static Tensor eager(const params& p, const Tensor& x) {
    const bool t = tanh_form(p);
    require_float32(target, "inp", x);
    Tensor y = Tensor::empty(x.shape(), DType::float32, target);
    const float* in = x.data<float>();
    float* out = y.data<float>();
    for (std::int64_t i = 0, n = x.numel(); i < n; ++i) out[i] = kernels::gelu(in[i], t);
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params& p) {
    const std::string& x = cx.input(0).name;
    const auto tmp = [&](std::string_view what) { return cx.fresh(cx.output() + "_" + std::string(what)); };
    auto& g = cx.graph();
    std::string inner;
    if (tanh_form(p)) {  // tanh(sqrt(2/pi) * (x + 0.044715 * x * x * x))
      const std::string x3 = cx.node1("Mul", {cx.node1("Mul", {x, x}, tmp("x2")), x}, tmp("x3"));
      const std::string s = cx.node1("Add", {x, cx.node1("Mul", {x3, g.scalar(0.044715)}, tmp("cubic"))}, tmp("sum"));
      inner = cx.node1("Tanh", {cx.node1("Mul", {s, g.scalar(0.79788456080286535588)}, tmp("scaled"))}, tmp("tanh"));
    } else {  // erf(x / sqrt 2)
      inner = cx.node1("Erf", {cx.node1("Div", {x, g.scalar(1.41421356237309504880)}, tmp("scaled"))}, tmp("erf"));
    }
    const std::string one_plus = cx.node1("Add", {inner, g.scalar(1.0)}, tmp("one_plus"));
    const std::string half_x = cx.node1("Mul", {x, g.scalar(0.5)}, tmp("half_x"));
    cx.node("Mul", {half_x, one_plus}, {cx.output()});
  }
};
inline constexpr gelu_fn gelu{};
TRACEMOD_REGISTER_BUILTIN_OP(gelu_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
