// The unary math ops: abs, ceil, floor, round, sign, sin, cos, tan, asin, acos, atan, sinh, cosh,
// asinh, acosh, atanh, log and softplus (F::abs(x), ...; targets "elemwise.<name>"), one row each of
// kernels/math_unary.hpp's table. Each is a unary_op (float32 in and out, elementwise, fused by
// elemwise.fused under its kernel's name) with its algebraic facts from the row, and its ONNX node
// type (Abs, Ceil, ..., Softplus) both ways.
#pragma once

#include <tracemod/functional/elementwise.hpp>
#include <tracemod/kernels/math_unary.hpp>

#include <array>
#include <string_view>

namespace tracemod::functional {

namespace detail {
#define TRACEMOD_MATH_UNARY_FACTS(op_name, onnx_type, scale, idem, expression)                        \
  template <>                                                                                         \
  inline constexpr kernel_facts facts_of<kernels::op_name##_op>{.scaling = scale_rule::scale,        \
                                                                .idempotent = (idem)};              \
  template <>                                                                                         \
  struct onnx_of<kernels::op_name##_op> {                                                             \
    static constexpr std::array types{std::string_view(onnx_type)};                                  \
  };
TRACEMOD_MATH_UNARY(TRACEMOD_MATH_UNARY_FACTS)
#undef TRACEMOD_MATH_UNARY_FACTS
}  // namespace detail

#define TRACEMOD_MATH_UNARY_OP(op_name, onnx_type, scale, idem, expression)       \
  struct op_name##_fn : unary_op<op_name##_fn, kernels::op_name##_op> {           \
    static constexpr std::string_view name = #op_name;                           \
    static constexpr std::string_view target = "elemwise." #op_name;             \
    static constexpr call_kind kind = call_kind::function;                        \
  };                                                                              \
  inline constexpr op_name##_fn op_name{};                                        \
  TRACEMOD_REGISTER_BUILTIN_OP(op_name##_fn);
TRACEMOD_MATH_UNARY(TRACEMOD_MATH_UNARY_OP)
#undef TRACEMOD_MATH_UNARY_OP

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
