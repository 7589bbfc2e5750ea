// int32 arithmetic of the elementwise ops add, sub, mul and floor_div: how shapes computed as values
// (functional/shape_values.hpp) are combined, as torch and MegEngine do with `x.size(0) * 2`.
// Eagerly it is an exact scalar loop over int32 tensors (and integer numbers), refusing results
// outside int32; while a graph is recorded it carries the operands' ShapeValue through the op, the
// same arithmetic on each element's DimExpr. The float32 kernels never see int32 data.
#pragma once

#include <tracemod/core/dim.hpp>
#include <tracemod/core/dtype.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/kernels/broadcast_map.hpp>
#include <tracemod/kernels/elementwise.hpp>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod::functional::detail {

/// The integer form of an elementwise kernel, on numbers and on symbolic extents; kernels without
/// one (div, minimum, maximum) compute in float32 only.
template <class KernelOp>
struct int_arith;
template <>
struct int_arith<kernels::add_op> {
  static std::int64_t apply(std::int64_t a, std::int64_t b) { return a + b; }
  static DimExpr apply(const DimExpr& a, const DimExpr& b) { return a + b; }
};
template <>
struct int_arith<kernels::sub_op> {
  static std::int64_t apply(std::int64_t a, std::int64_t b) { return a - b; }
  static DimExpr apply(const DimExpr& a, const DimExpr& b) { return a - b; }
};
template <>
struct int_arith<kernels::mul_op> {
  static std::int64_t apply(std::int64_t a, std::int64_t b) { return a * b; }
  static DimExpr apply(const DimExpr& a, const DimExpr& b) { return a * b; }
};
template <>
struct int_arith<kernels::floordiv_op> {
  static std::int64_t apply(std::int64_t a, std::int64_t b) {
    const std::int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  }
  static DimExpr apply(const DimExpr& a, const DimExpr& b) { return a / b; }
};

template <class KernelOp>
concept int_arith_kernel = requires(std::int64_t i) {
  { int_arith<KernelOp>::apply(i, i) } -> std::same_as<std::int64_t>;
};

/// KernelOp on two int32 operands (as int64, so that nothing overflows), checked to fit int32;
/// value_error naming `op` for a division by zero or a result outside int32.
template <class KernelOp>
std::int32_t int_apply(std::int64_t a, std::int64_t b, std::string_view op) {
  if (std::is_same_v<KernelOp, kernels::floordiv_op> && b == 0)
    throw value_error(std::string(op) + ": integer division of " + std::to_string(a) + " by zero");
  const std::int64_t r = int_arith<KernelOp>::apply(a, b);
  if (r < std::numeric_limits<std::int32_t>::min() || r > std::numeric_limits<std::int32_t>::max())
    throw value_error(std::string(op) + ": the int32 result " + std::to_string(a) + " " + std::string(KernelOp::name) + " " +
                      std::to_string(b) + " = " + std::to_string(r) + " does not fit in int32");
  return static_cast<std::int32_t>(r);
}

/// A number as an int32 operand: an integer in int32's range, else dtype_error naming the op.
inline std::int64_t int_number(double v, std::string_view op, std::string_view operand) {
  if (!(v == std::trunc(v)) || v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
    throw dtype_error(std::string(op) + ": operand '" + std::string(operand) + "' is the number " + std::to_string(v) +
                      ", but the other operand is int32, whose arithmetic takes integers in int32's range");
  return static_cast<std::int64_t>(v);
}

/// The output dtype of an arithmetic op on tensors of `in`: int32 when they all are, float32 when
/// none is; a mix is a dtype_error naming the op.
inline DType int_or_float_dtype(std::string_view op, std::span<const DType> in) {
  const auto ints = std::count(in.begin(), in.end(), DType::int32);
  if (ints == 0) return DType::float32;
  if (static_cast<std::size_t>(ints) == in.size()) return DType::int32;
  throw dtype_error(std::string(op) + ": operands of dtypes int32 and " +
                    std::string(dtype_name(*std::find_if(in.begin(), in.end(), [](DType d) { return d != DType::int32; }))) +
                    "; arithmetic on int32 tensors takes int32 tensors and integers");
}

/// The error for an int32 operand of an op whose kernel has no integer form (div, minimum,
/// maximum), the same eagerly and while a graph is recorded: true division of integers is not
/// integer arithmetic (torch's `/` gives float; its `//` is F::floor_div).
inline dtype_error int32_without_int_form(std::string_view op) {
  return dtype_error(std::string(op) + ": an int32 operand; int32 arithmetic is +, -, * and F::floor_div (for a "
                     "quotient of integers use F::floor_div, for a fraction astype(float32) first)");
}

/// KernelOp on int32 tensors (the caller checked their dtype) and integers with numpy broadcasting,
/// eagerly (Op names the messages); a number is a rank-0 operand.
template <class Op, class KernelOp, class A, class B>
Tensor eager_int_binary(const A& a, const B& b, const Shape& out_shape) {
  const auto operand = [&](const auto& x, std::size_t i, std::int32_t& number) -> std::pair<Shape, const std::int32_t*> {
    if constexpr (requires { x.shape(); }) {
      return {x.shape(), x.template data<std::int32_t>()};
    } else {
      number = static_cast<std::int32_t>(int_number(static_cast<double>(x), Op::target, Op::operands[i].name));
      return {Shape{}, &number};
    }
  };
  std::int32_t number_a = 0, number_b = 0;
  const auto [shape_a, pa] = operand(a, 0, number_a);
  const auto [shape_b, pb] = operand(b, 1, number_b);
  Tensor y = Tensor::empty(out_shape, DType::int32, Op::target);
  const auto f = [](std::int32_t u, std::int32_t v) { return int_apply<KernelOp>(u, v, Op::target); };
  kernels::broadcast_map(out_shape, y.data<std::int32_t>(), f, {shape_a, shape_b}, pa, pb);
  return y;
}

/// The value of KernelOp on two shape values (numbers count as rank-0 ones), element by element
/// with broadcasting; nullopt when an operand's value is not known.
template <class KernelOp>
std::optional<ShapeValue> int_value(const ShapeValue* a, const ShapeValue* b, std::string_view op) {
  if (a == nullptr || b == nullptr) return std::nullopt;
  const std::size_t na = a->example.size(), nb = b->example.size();
  if (na != nb && na != 1 && nb != 1) return std::nullopt;
  ShapeValue v;
  for (std::size_t i = 0; i < std::max(na, nb); ++i) {
    const std::size_t ia = na == 1 ? 0 : i, ib = nb == 1 ? 0 : i;
    v.example.push_back(int_apply<KernelOp>(a->example[ia], b->example[ib], op));
    v.dims.push_back(int_arith<KernelOp>::apply(a->dims[ia], b->dims[ib]));
  }
  return v;
}

}  // namespace tracemod::functional::detail
