// Elementwise SIMD kernels: unary and binary operations on contiguous float32 arrays, with
// tensor-scalar forms and numpy broadcasting. Every element, wherever it sits (vector body, tail,
// broadcast row, scalar call), goes through the same fbatch code, so results are bit-identical
// across kernels and a fused loop composed from the same operations.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/kernels/detail/activation.hpp>
#include <tracemod/kernels/detail/elementwise_broadcast.hpp>
#include <tracemod/kernels/detail/elementwise_loop.hpp>
#include <tracemod/kernels/detail/elementwise_math.hpp>
#include <tracemod/kernels/simd.hpp>

#include <array>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>

namespace tracemod::kernels {

/// An operation the kernels apply lane by lane: fbatch -> fbatch and float -> float.
template <class Op>
concept unary_operation = requires(const Op& op, const fbatch& v, float s) {
  { op(v) } -> std::same_as<fbatch>;
  { op(s) } -> std::same_as<float>;
};

/// As unary_operation, with two operands.
template <class Op>
concept binary_operation = requires(const Op& op, const fbatch& v, float s) {
  { op(v, v) } -> std::same_as<fbatch>;
  { op(s, s) } -> std::same_as<float>;
};

template <class Op>
inline constexpr bool is_unary_op_v = unary_operation<Op>;
template <class Op>
inline constexpr bool is_binary_op_v = binary_operation<Op>;

// The operations. Each is a stateless function object: the fbatch overload does the work, the float
// overload runs it on one lane. NaN in gives NaN out for every operation, as in PyTorch:
// relu/relu6 pass NaN through and minimum/maximum return NaN when either operand is NaN.
// relu and relu6 map -0 to +0.

struct neg_op {
  static constexpr std::string_view name = "neg";
  fbatch operator()(const fbatch& x) const noexcept { return -x; }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

struct relu_op {
  static constexpr std::string_view name = "relu";
  fbatch operator()(const fbatch& x) const noexcept { return detail::relu(x); }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

struct relu6_op {
  static constexpr std::string_view name = "relu6";
  fbatch operator()(const fbatch& x) const noexcept { return detail::relu6(x); }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

struct exp_op {
  static constexpr std::string_view name = "exp";
  fbatch operator()(const fbatch& x) const noexcept { return detail::exp_full_range(x); }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

struct sigmoid_op {
  static constexpr std::string_view name = "sigmoid";
  fbatch operator()(const fbatch& x) const noexcept { return detail::sigmoid(x); }
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

struct tanh_op {
  static constexpr std::string_view name = "tanh";
  fbatch operator()(const fbatch& x) const noexcept { return xsimd::tanh(x); }  // 1 ulp, +-1 for large |x|
  float operator()(float x) const noexcept { return detail::on_one_lane(*this, x); }
};

struct add_op {
  static constexpr std::string_view name = "add";
  fbatch operator()(const fbatch& a, const fbatch& b) const noexcept { return a + b; }
  float operator()(float a, float b) const noexcept { return detail::on_one_lane(*this, a, b); }
};

/// relu(a + b) in one pass: the residual add and activation of the conv epilogue
/// (conv2d_bias_activation) on their own, for MegEngine's FUSE_ADD_RELU; the bits of add then relu.
struct add_relu_op {
  static constexpr std::string_view name = "add_relu";
  fbatch operator()(const fbatch& a, const fbatch& b) const noexcept { return detail::relu(a + b); }
  float operator()(float a, float b) const noexcept { return detail::on_one_lane(*this, a, b); }
};

struct sub_op {
  static constexpr std::string_view name = "sub";
  fbatch operator()(const fbatch& a, const fbatch& b) const noexcept { return a - b; }
  float operator()(float a, float b) const noexcept { return detail::on_one_lane(*this, a, b); }
};

struct mul_op {
  static constexpr std::string_view name = "mul";
  fbatch operator()(const fbatch& a, const fbatch& b) const noexcept { return a * b; }
  float operator()(float a, float b) const noexcept { return detail::on_one_lane(*this, a, b); }
};

struct div_op {
  static constexpr std::string_view name = "div";
  fbatch operator()(const fbatch& a, const fbatch& b) const noexcept { return a / b; }
  float operator()(float a, float b) const noexcept { return detail::on_one_lane(*this, a, b); }
};

/// Floor division as torch's floor_divide computes it for floats: the quotient of a - fmod(a, b),
/// which is exact, rounded down (so 7 // -2 = -4 and -0.0 keeps its sign); a / b for b = 0.
struct floordiv_op {
  static constexpr std::string_view name = "floordiv";
  fbatch operator()(const fbatch& a, const fbatch& b) const noexcept {
    const fbatch zero(0.0f);
    const fbatch mod = xsimd::fmod(a, b);
    fbatch div = (a - mod) / b;
    const auto signs_differ = ((b < zero) & (mod > zero)) | ((b > zero) & (mod < zero));  // so mod != 0
    div = xsimd::select(signs_differ, div - fbatch(1.0f), div);
    fbatch q = xsimd::floor(div);
    q = xsimd::select(div - q > fbatch(0.5f), q + fbatch(1.0f), q);
    q = xsimd::select(div == zero, xsimd::copysign(zero, a / b), q);
    return xsimd::select(b == zero, a / b, q);
  }
  float operator()(float a, float b) const noexcept { return detail::on_one_lane(*this, a, b); }
};

struct minimum_op {
  static constexpr std::string_view name = "minimum";
  fbatch operator()(const fbatch& a, const fbatch& b) const noexcept {
    return xsimd::select(a < b || xsimd::isnan(a), a, b);  // b is NaN: a < b is false
  }
  float operator()(float a, float b) const noexcept { return detail::on_one_lane(*this, a, b); }
};

struct maximum_op {
  static constexpr std::string_view name = "maximum";
  fbatch operator()(const fbatch& a, const fbatch& b) const noexcept {
    return xsimd::select(a > b || xsimd::isnan(a), a, b);  // b is NaN: a > b is false
  }
  float operator()(float a, float b) const noexcept { return detail::on_one_lane(*this, a, b); }
};

// Contiguous kernels. n <= 0 does nothing; pointers need no alignment; y may alias an input exactly
// (the in-place form is the same call with y == x).

/// y[i] = op(x[i])
template <unary_operation Op>
void unary(const Op& op, const float* x, float* y, std::int64_t n) {
  detail::transform(op, y, n, detail::array_operand{x});
}

/// y[i] = op(a[i], b[i])
template <binary_operation Op>
void binary(const Op& op, const float* a, const float* b, float* y, std::int64_t n) {
  detail::transform(op, y, n, detail::array_operand{a}, detail::array_operand{b});
}

/// y[i] = op(a[i], b)
template <binary_operation Op>
void binary(const Op& op, const float* a, float b, float* y, std::int64_t n) {
  detail::transform(op, y, n, detail::array_operand{a}, detail::scalar_operand{fbatch(b)});
}

/// y[i] = op(a, b[i])
template <binary_operation Op>
void binary(const Op& op, float a, const float* b, float* y, std::int64_t n) {
  detail::transform(op, y, n, detail::scalar_operand{fbatch(a)}, detail::array_operand{b});
}

/// y = op(a, b) with numpy broadcasting; all three arrays are contiguous row-major. Throws
/// shape_error unless sa and sb broadcast to exactly sy. y may alias a (or b) only when sa == sy
/// (sb == sy).
template <binary_operation Op>
void binary_broadcast(const Op& op, const float* a, const Shape& sa, const float* b, const Shape& sb, float* y,
                      const Shape& sy) {
  const std::string_view name = detail::op_name<Op>();
  if (const Shape expected = broadcast_shapes(sa, sb, name); expected != sy)
    throw shape_error(std::string(name) + ": output shape " + sy.to_string() + " is not " + expected.to_string() +
                      ", the broadcast of " + sa.to_string() + " and " + sb.to_string());
  if (sy.numel() == 0) return;

  const std::array<Shape, 2> shapes{sa, sb};
  const detail::broadcast_rows_of<2> plan = detail::plan_broadcast_rows<2>(shapes, sy);
  const std::int64_t n = plan.row_length;
  // Rows split across threads; each row is one contiguous pass (itself split when rows are few).
  const auto rows = [&](const auto& row) {
    detail::parallel_rows(plan.rows, n, [&](std::int64_t first, std::int64_t last) {
      detail::for_each_broadcast_row(plan, first, last, row);
    });
  };
  if (plan.row_stride(0) != 0 && plan.row_stride(1) != 0)
    rows([&](const std::int64_t* at, std::int64_t iy) { binary(op, a + at[0], b + at[1], y + iy, n); });
  else if (plan.row_stride(0) != 0)
    rows([&](const std::int64_t* at, std::int64_t iy) { binary(op, a + at[0], b[at[1]], y + iy, n); });
  else
    rows([&](const std::int64_t* at, std::int64_t iy) { binary(op, a[at[0]], b + at[1], y + iy, n); });
}

}  // namespace tracemod::kernels
