// Powers: pow (x ** y with numpy broadcasting, either side a tensor or a number), square, sqrt and
// rsqrt, and the tensor methods `x ** y` records in MegEngine (__pow__, __rpow__), each with its
// kernel and its ONNX rule.
#pragma once

#include <tracemod/functional/elementwise.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <string_view>

namespace tracemod::kernels {

/// a ** b, lane by lane through std::pow (C's powf: IEEE special cases, a negative base with an
/// integral exponent keeps its sign, a negative base with another exponent gives NaN), so every
/// element has the bits of the scalar call. xsimd's vector pow is a few ulps off even for b = 1.
struct pow_op {
  static constexpr std::string_view name = "pow";
  fbatch operator()(const fbatch& a, const fbatch& b) const noexcept {
    alignas(buffer_alignment) std::array<float, simd_width> x{};
    alignas(buffer_alignment) std::array<float, simd_width> y{};
    a.store_aligned(x.data());
    b.store_aligned(y.data());
    for (std::size_t i = 0; i < simd_width; ++i) x[i] = std::pow(x[i], y[i]);
    return fbatch::load_aligned(x.data());
  }
  float operator()(float a, float b) const noexcept { return std::pow(a, b); }
};

/// x * x.
struct square_op {
  static constexpr std::string_view name = "square";
  fbatch operator()(const fbatch& x) const noexcept { return x * x; }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

/// The correctly rounded square root (NaN for x < 0, -0 for -0).
struct sqrt_op {
  static constexpr std::string_view name = "sqrt";
  fbatch operator()(const fbatch& x) const noexcept { return xsimd::sqrt(x); }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

/// 1 / sqrt(x), both correctly rounded (no approximate reciprocal square root): the bits of
/// 1.f / std::sqrt(x); inf for 0, NaN for x < 0.
struct rsqrt_op {
  static constexpr std::string_view name = "rsqrt";
  fbatch operator()(const fbatch& x) const noexcept { return fbatch(1.0f) / xsimd::sqrt(x); }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

}  // namespace tracemod::kernels

namespace tracemod::functional {

namespace detail {
template <>
struct onnx_of<kernels::pow_op> {
  static constexpr std::array types{std::string_view("Pow")};
};
template <>
struct onnx_of<kernels::sqrt_op> {
  static constexpr std::array types{std::string_view("Sqrt")};
};
}  // namespace detail

/// x ** y: MegEngine's F.pow, PyTorch's torch.pow; either operand may be a C++ number.
struct pow_fn : binary_op<pow_fn, kernels::pow_op> {
  static constexpr std::string_view name = "pow";
  static constexpr std::string_view target = "elemwise.pow";
  static constexpr call_kind kind = call_kind::function;
};
inline constexpr pow_fn pow{};
TRACEMOD_REGISTER_BUILTIN_OP(pow_fn);

/// sqrt(x); ONNX's Sqrt imports as it.
struct sqrt_fn : unary_op<sqrt_fn, kernels::sqrt_op> {
  static constexpr std::string_view name = "sqrt";
  static constexpr std::string_view target = "elemwise.sqrt";
  static constexpr call_kind kind = call_kind::function;
};
inline constexpr sqrt_fn sqrt{};
TRACEMOD_REGISTER_BUILTIN_OP(sqrt_fn);

/// x * x. Exported as Mul(x, x), which imports as elemwise.mul with the same bits.
struct square_fn : unary_op<square_fn, kernels::square_op> {
  static constexpr std::string_view name = "square";
  static constexpr std::string_view target = "elemwise.square";
  static constexpr call_kind kind = call_kind::function;

  static void onnx_export(onnx_export_context& cx, const params&) {
    cx.node("Mul", {cx.input(0).name, cx.input(0).name}, {cx.output()});
  }
};
inline constexpr square_fn square{};
TRACEMOD_REGISTER_BUILTIN_OP(square_fn);

/// 1 / sqrt(x). Exported as Reciprocal(Sqrt(x)); Sqrt imports as elemwise.sqrt and Reciprocal as
/// elemwise.div(1.0, x), which together have rsqrt's bits.
struct rsqrt_fn : unary_op<rsqrt_fn, kernels::rsqrt_op> {
  static constexpr std::string_view name = "rsqrt";
  static constexpr std::string_view target = "elemwise.rsqrt";
  static constexpr call_kind kind = call_kind::function;

  static void onnx_export(onnx_export_context& cx, const params&) {
    const std::string root = cx.node1("Sqrt", {cx.input(0).name}, cx.fresh(cx.output() + "_sqrt"));
    cx.node("Reciprocal", {root}, {cx.output()});
  }
  static std::vector<onnx_import_rule> onnx_imports() { return {{"Reciprocal", {}, {}, &import_reciprocal}}; }

 private:
  static void import_reciprocal(onnx_import_context& cx) { cx.bind(cx.call<div_fn>({}, Value(1.0), cx.tensor(0))); }
};
inline constexpr rsqrt_fn rsqrt{};
TRACEMOD_REGISTER_BUILTIN_OP(rsqrt_fn);

// (tensor_methods.hpp's tensor_binary_method, spelled out: that header reaches this one through the
// registry before it defines the template.)
#define TRACEMOD_POW_METHOD(op_name, method_name, is_reflected)                                      \
  struct op_name##_fn : broadcast_binary<op_name##_fn, kernels::pow_op, is_reflected> {             \
    static constexpr std::string_view name = method_name;                                            \
    static constexpr std::string_view target = method_name;                                          \
    static constexpr call_kind kind = call_kind::method;                                             \
    static constexpr bool reflected = is_reflected;                                                  \
    static constexpr std::array operands{operand{"self", operand_kind::tensor},                      \
                                         operand{"other", operand_kind::tensor_or_scalar}};          \
  };                                                                                                 \
  inline constexpr op_name##_fn op_name{};                                                           \
  TRACEMOD_REGISTER_BUILTIN_OP(op_name##_fn);

/// self ** other and other ** self, as MegEngine records `x ** y` and `2 ** x`: C++ has no `**`,
/// so forward code calls F::method_pow(x, y) (or F::pow(x, y), recorded as a function call).
TRACEMOD_POW_METHOD(method_pow, "__pow__", false)
TRACEMOD_POW_METHOD(method_rpow, "__rpow__", true)

#undef TRACEMOD_POW_METHOD

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
