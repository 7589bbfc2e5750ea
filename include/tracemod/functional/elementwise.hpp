// Elementwise functional ops: relu, relu6, neg, exp, sigmoid, tanh (unary) and add, sub, mul, div,
// floor_div, minimum, maximum (binary, numpy broadcasting, tensors or scalars on either side). add,
// sub, mul and floor_div also compute on int32 tensors (shapes as values, int_arith.hpp).
#pragma once

#include <tracemod/functional/int_arith.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/elementwise.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tracemod::functional {

namespace detail {

/// The algebraic facts of an elementwise kernel, which the ops computing it inherit
/// (elementwise_kernel): what arithmetic it is, how it commutes with scaling by k
/// (k*x + k*y = k*(x + y), -(k*x) = k*(-x); relu, max and min commute with k > 0 only), and
/// whether applying it twice is applying it once (relu(relu(x)) = relu(x)).
struct kernel_facts {
  arith_kind arith = arith_kind::none;
  scale_rule scaling = scale_rule::none;
  bool idempotent = false;
};
template <class KernelOp>
inline constexpr kernel_facts facts_of{};
template <>
inline constexpr kernel_facts facts_of<kernels::add_op>{.arith = arith_kind::add, .scaling = scale_rule::linear};
template <>
inline constexpr kernel_facts facts_of<kernels::sub_op>{.arith = arith_kind::sub, .scaling = scale_rule::linear};
template <>
inline constexpr kernel_facts facts_of<kernels::mul_op>{.arith = arith_kind::mul};
template <>
inline constexpr kernel_facts facts_of<kernels::div_op>{.arith = arith_kind::div};
template <>
inline constexpr kernel_facts facts_of<kernels::neg_op>{.arith = arith_kind::neg, .scaling = scale_rule::linear};
template <>
inline constexpr kernel_facts facts_of<kernels::relu_op>{.scaling = scale_rule::positive, .idempotent = true};
template <>
inline constexpr kernel_facts facts_of<kernels::maximum_op>{.scaling = scale_rule::positive};
template <>
inline constexpr kernel_facts facts_of<kernels::minimum_op>{.scaling = scale_rule::positive};

/// A base of every op that computes KernelOp elementwise: the kernel and its facts.
template <class KernelOp>
struct elementwise_kernel {
  using kernel_op = KernelOp;
  static constexpr arith_kind arith = facts_of<KernelOp>.arith;
  static constexpr scale_rule scaling = facts_of<KernelOp>.scaling;
  static constexpr bool idempotent = facts_of<KernelOp>.idempotent;
};

/// The ONNX node types an elementwise kernel is: export writes the first, import reads each.
template <class KernelOp>
struct onnx_of {
  static constexpr std::array<std::string_view, 0> types{};
};
#define TRACEMOD_ONNX_OF(kernel, ...)                                                   \
  template <>                                                                           \
  struct onnx_of<kernels::kernel> {                                                     \
    static constexpr std::array types{__VA_ARGS__};                                     \
  };
TRACEMOD_ONNX_OF(relu_op, std::string_view("Relu"))
TRACEMOD_ONNX_OF(sigmoid_op, std::string_view("Sigmoid"))
TRACEMOD_ONNX_OF(neg_op, std::string_view("Neg"))
TRACEMOD_ONNX_OF(exp_op, std::string_view("Exp"))
TRACEMOD_ONNX_OF(tanh_op, std::string_view("Tanh"))
TRACEMOD_ONNX_OF(add_op, std::string_view("Add"), std::string_view("Sum"))
TRACEMOD_ONNX_OF(sub_op, std::string_view("Sub"))
TRACEMOD_ONNX_OF(mul_op, std::string_view("Mul"))
TRACEMOD_ONNX_OF(div_op, std::string_view("Div"))
TRACEMOD_ONNX_OF(floordiv_op, std::string_view("Mod"))  // exported by onnx_export_binary, not as Mod
TRACEMOD_ONNX_OF(minimum_op, std::string_view("Min"))
TRACEMOD_ONNX_OF(maximum_op, std::string_view("Max"))
#undef TRACEMOD_ONNX_OF

/// Shape of a binary operand: a scalar broadcasts like a rank-0 tensor.
template <class A>
Shape operand_shape(const A& a) {
  if constexpr (scalar_operand<A>)
    return Shape{};
  else
    return a.shape();
}

template <class Op, class KernelOp, class A, class B>
Tensor eager_binary(const A& a, const B& b) {
  static_assert(!(scalar_operand<A> && scalar_operand<B>), "tracemod: a binary op needs at least one tensor operand");
  if constexpr (int_arith_kernel<KernelOp>) {
    // Integer arithmetic when every tensor operand is int32; an int32 tensor beside a float32 one
    // meets the float32 check below, as in a typed graph.
    const auto int32_or_number = [](const auto& x) {
      if constexpr (scalar_operand<std::remove_cvref_t<decltype(x)>>)
        return true;
      else
        return x.defined() && x.dtype() == DType::int32;
    };
    if (int32_or_number(a) && int32_or_number(b))
      return eager_int_binary<Op, KernelOp>(a, b, broadcast_shapes(operand_shape(a), operand_shape(b), Op::target));
  } else {
    const auto int32 = [](const auto& x) {
      if constexpr (scalar_operand<std::remove_cvref_t<decltype(x)>>)
        return false;
      else
        return x.defined() && x.dtype() == DType::int32;
    };
    if (int32(a) || int32(b)) throw int32_without_int_form(Op::target);
  }
  if constexpr (!scalar_operand<A>) require_float32(Op::target, Op::operands[0].name, a);
  if constexpr (!scalar_operand<B>) require_float32(Op::target, Op::operands[1].name, b);
  const Shape out_shape = broadcast_shapes(operand_shape(a), operand_shape(b), Op::target);
  Tensor y = Tensor::empty(out_shape, DType::float32, Op::target);
  const std::int64_t n = out_shape.numel();
  if constexpr (scalar_operand<A>) {
    kernels::binary(KernelOp{}, static_cast<float>(a), b.template data<float>(), y.data<float>(), n);
  } else if constexpr (scalar_operand<B>) {
    kernels::binary(KernelOp{}, a.template data<float>(), static_cast<float>(b), y.data<float>(), n);
  } else if (a.shape() == b.shape()) {
    kernels::binary(KernelOp{}, a.template data<float>(), b.template data<float>(), y.data<float>(), n);
  } else {
    kernels::binary_broadcast(KernelOp{}, a.template data<float>(), a.shape(), b.template data<float>(), b.shape(),
                              y.data<float>(), out_shape);
  }
  return y;
}

/// The export rule of an elementwise kernel's binary op: one node (elementwise.hpp's
/// onnx_export_elementwise), or for floor division, whose ONNX Div truncates integers and rounds
/// floats, the exact forms (a - Mod(a, b)) / b for int32 (Mod with fmod 0 takes the divisor's sign)
/// and Floor(a / b) for float32.
template <class KernelOp>
void onnx_export_binary(onnx_export_context& cx, bool reflected) {
  if constexpr (std::is_same_v<KernelOp, kernels::floordiv_op>) {
    const bool ints = onnx_int32_operands(cx);
    std::string a = ints ? onnx_int32_value(cx, cx.input(0)) : cx.value(cx.input(0));
    std::string b = ints ? onnx_int32_value(cx, cx.input(1)) : cx.value(cx.input(1));
    if (reflected) std::swap(a, b);
    if (ints) {
      const std::string mod = cx.node1("Mod", {a, b}, cx.fresh(cx.output() + "_mod"), {{"fmod", std::int64_t{0}}});
      const std::string exact = cx.node1("Sub", {a, mod}, cx.fresh(cx.output() + "_exact"));
      cx.node("Div", {exact, b}, {cx.output()});
    } else {
      cx.node("Floor", {cx.node1("Div", {a, b}, cx.fresh(cx.output() + "_div"))}, {cx.output()});
    }
  } else {
    onnx_export_elementwise(cx, onnx_of<KernelOp>::types[0], reflected);
  }
}

/// ONNX's integer Div, which truncates toward zero, from int32 floor division and arithmetic, exact
/// for every sign: with q = a // b and r = a - b*q (r has b's sign, as ONNX's Mod), the quotient
/// truncated is q + 1 when r != 0 and q < 0. [r != 0] is -((-r) // b) and [q < 0] is -(q // 2^31),
/// each 0 or 1, so every step keeps the shape value of its operands; 2^31 divides in three steps
/// (2048, 2048, 512), as a graph's numbers are exact below 2^24 only (floor(floor(x/m)/n) is
/// floor(x/(m*n))).
inline onnx_value onnx_import_trunc_div(onnx_import_context& cx, onnx_value a, onnx_value b) {
  const auto call = [&](std::string_view target, onnx_arg x, onnx_arg y) { return cx.call(target, {std::move(x), std::move(y)}, {}); };
  const onnx_value q = call("elemwise.floor_div", a, b);
  const onnx_value r = call("elemwise.sub", a, call("elemwise.mul", b, q));
  const onnx_value inexact =
      call("elemwise.sub", Value(0), call("elemwise.floor_div", call("elemwise.sub", Value(0), r), b));
  onnx_value below = q;
  for (const int step : {2048, 2048, 512}) below = call("elemwise.floor_div", below, Value(step));
  const onnx_value negative = call("elemwise.sub", Value(0), below);
  return call("elemwise.add", q, call("elemwise.mul", inexact, negative));
}

/// ONNX's Div of int32 values (shapes computed at run time) truncates: onnx_import_trunc_div; of
/// float32 ones it is elemwise.div.
template <class Op>
void onnx_import_div(onnx_import_context& cx) {
  if (cx.input_count() != 2 || (cx.dtype(cx.tensor(0)) != DType::int32 && cx.dtype(cx.tensor(1)) != DType::int32))
    return onnx_import_variadic<Op>(cx);
  cx.bind(onnx_import_trunc_div(cx, cx.tensor(0), cx.tensor(1)));
}

/// ONNX's Mod of int32 values: a - b * (a // b) for fmod=0 (the divisor's sign, Python's %), and
/// a - b * trunc(a / b) for fmod=1 (the dividend's sign, C's fmod). Mod of float32 values is
/// unsupported.
inline void onnx_import_mod(onnx_import_context& cx) {
  const onnx_value a = cx.tensor(0), b = cx.tensor(1);
  if (cx.dtype(a) != DType::int32 || cx.dtype(b) != DType::int32)
    cx.unsupported("Mod of " + std::string(dtype_name(cx.dtype(a))) + " and " + std::string(dtype_name(cx.dtype(b))) +
                   " values computed at run time (tracemod computes Mod of int32 values)");
  const onnx_value q = cx.attr_int("fmod", 0) == 0 ? cx.call("elemwise.floor_div", {a, b}, {}) : onnx_import_trunc_div(cx, a, b);
  cx.bind(cx.call("elemwise.sub", {a, cx.call("elemwise.mul", {b, q}, {})}, {}));
}

/// The dtype and value rules of a binary op whose kernel has an integer form (int_arith.hpp): int32
/// on int32 tensors, float32 otherwise; on shape values (and integers), the same arithmetic on each
/// element's expression. Kernels without one refuse an int32 operand while recording, as eagerly.
template <class Derived, class KernelOp, bool Reflected, bool = int_arith_kernel<KernelOp>>
struct int_rules {
  static DType infer_dtype(const no_params*, std::span<const DType> in) {
    if (std::find(in.begin(), in.end(), DType::int32) != in.end()) throw int32_without_int_form(Derived::target);
    return DType::float32;
  }
};
template <class Derived, class KernelOp, bool Reflected>
struct int_rules<Derived, KernelOp, Reflected, true> {
  static DType infer_dtype(const no_params*, std::span<const DType> in) { return int_or_float_dtype(Derived::target, in); }
  static std::optional<ShapeValue> infer_value(const no_params&, const ShapeDims& a, const ShapeDims& b) {
    return Reflected ? int_value<KernelOp>(b.value, a.value, Derived::target) : int_value<KernelOp>(a.value, b.value, Derived::target);
  }
};

}  // namespace detail

/// f(x) applied to every element.
template <class Derived, class KernelOp>
struct unary_op : op_base<Derived>, detail::elementwise_kernel<KernelOp> {
  using params = no_params;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  static constexpr std::tuple<> fields{};

  static constexpr Shape infer_shape(const params&, const Shape& x) { return x; }

  static Tensor eager(const params&, const Tensor& x) {
    require_float32(Derived::target, "inp", x);
    Tensor y = Tensor::empty(x.shape(), DType::float32, Derived::target);
    kernels::unary(KernelOp{}, x.data<float>(), y.data<float>(), x.numel());
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params&)
    requires(!detail::onnx_of<KernelOp>::types.empty())
  {
    onnx_export_elementwise(cx, detail::onnx_of<KernelOp>::types[0], false);
  }
  static constexpr auto onnx_import_types = detail::onnx_of<KernelOp>::types;
  static void onnx_import(onnx_import_context& cx) { onnx_import_unary<Derived>(cx); }
};

/// KernelOp(a, b) with numpy broadcasting, its operands in call order or, Reflected, swapped (the
/// tensor methods' __rop__ forms compute other OP self): what binary_op and the tensor methods share.
template <class Derived, class KernelOp, bool Reflected>
struct broadcast_binary : op_base<Derived>, detail::elementwise_kernel<KernelOp>, detail::int_rules<Derived, KernelOp, Reflected> {
  using params = no_params;
  static constexpr std::tuple<> fields{};

  static constexpr Shape infer_shape(const params&, const Shape& a, const Shape& b) {
    return Reflected ? broadcast_shapes(b, a, Derived::target) : broadcast_shapes(a, b, Derived::target);
  }

  template <class A, class B>
  static Tensor eager(const params&, const A& a, const B& b) {
    if constexpr (Reflected)
      return detail::eager_binary<Derived, KernelOp>(b, a);
    else
      return detail::eager_binary<Derived, KernelOp>(a, b);
  }

  static void onnx_export(onnx_export_context& cx, const params&) { detail::onnx_export_binary<KernelOp>(cx, Reflected); }
};

/// f(x, y) with numpy broadcasting; either operand may be a C++ number.
template <class Derived, class KernelOp>
struct binary_op : broadcast_binary<Derived, KernelOp, false> {
  static constexpr std::array operands{operand{"x", operand_kind::tensor_or_scalar},
                                       operand{"y", operand_kind::tensor_or_scalar}};
  static constexpr auto onnx_import_types = detail::onnx_of<KernelOp>::types;
  // Numpy-style broadcasting is the only kind before opset 7 without `axis`; Mod (floor division's
  // import) reads fmod.
  static constexpr auto onnx_import_attributes = [] {
    if constexpr (std::is_same_v<KernelOp, kernels::floordiv_op>)
      return std::array{std::string_view("fmod")};
    else
      return std::array{std::string_view("broadcast")};
  }();
  static void onnx_import(onnx_import_context& cx) {
    if constexpr (std::is_same_v<KernelOp, kernels::floordiv_op>)
      detail::onnx_import_mod(cx);
    else if constexpr (std::is_same_v<KernelOp, kernels::div_op>)
      detail::onnx_import_div<Derived>(cx);
    else
      onnx_import_variadic<Derived>(cx);
  }
};

#define TRACEMOD_DEFINE_ELEMWISE_OP(op_name, base, kernel, module)                      \
  struct op_name##_fn : base<op_name##_fn, kernels::kernel> {                            \
    static constexpr std::string_view name = #op_name;                                  \
    static constexpr std::string_view target = module "." #op_name;                     \
    static constexpr call_kind kind = call_kind::function;                              \
  };                                                                                     \
  inline constexpr op_name##_fn op_name{};                                                \
  TRACEMOD_REGISTER_BUILTIN_OP(op_name##_fn);

TRACEMOD_DEFINE_ELEMWISE_OP(relu, unary_op, relu_op, "nn")
TRACEMOD_DEFINE_ELEMWISE_OP(sigmoid, unary_op, sigmoid_op, "nn")
TRACEMOD_DEFINE_ELEMWISE_OP(neg, unary_op, neg_op, "elemwise")
TRACEMOD_DEFINE_ELEMWISE_OP(exp, unary_op, exp_op, "elemwise")
TRACEMOD_DEFINE_ELEMWISE_OP(tanh, unary_op, tanh_op, "elemwise")
TRACEMOD_DEFINE_ELEMWISE_OP(add, binary_op, add_op, "elemwise")
TRACEMOD_DEFINE_ELEMWISE_OP(sub, binary_op, sub_op, "elemwise")
TRACEMOD_DEFINE_ELEMWISE_OP(mul, binary_op, mul_op, "elemwise")
TRACEMOD_DEFINE_ELEMWISE_OP(div, binary_op, div_op, "elemwise")
TRACEMOD_DEFINE_ELEMWISE_OP(floor_div, binary_op, floordiv_op, "elemwise")
TRACEMOD_DEFINE_ELEMWISE_OP(minimum, binary_op, minimum_op, "elemwise")
TRACEMOD_DEFINE_ELEMWISE_OP(maximum, binary_op, maximum_op, "elemwise")

#undef TRACEMOD_DEFINE_ELEMWISE_OP

/// min(max(x, 0), 6): ONNX's Clip with those bounds; Clip imports as relu6, relu, or maximum and
/// minimum for other bounds.
struct relu6_fn : unary_op<relu6_fn, kernels::relu6_op> {
  static constexpr std::string_view name = "relu6";
  static constexpr std::string_view target = "nn.relu6";
  static constexpr call_kind kind = call_kind::function;

  static void onnx_export(onnx_export_context& cx, const params&) {
    cx.node("Clip", {cx.input(0).name, cx.graph().scalar(0.0), cx.graph().scalar(6.0)}, {cx.output()});
  }
  static constexpr std::array onnx_import_types{std::string_view("Clip")};
  static constexpr std::array onnx_import_attributes{std::string_view("min"), std::string_view("max")};
  static constexpr std::array onnx_static_inputs{1, 2};
  static void onnx_import(onnx_import_context& cx) {
    std::optional<double> lo, hi;
    if (cx.opset() < 11) {  // the bounds were attributes before opset 11
      if (cx.has_attr("min")) lo = cx.attr_float("min", 0);
      if (cx.has_attr("max")) hi = cx.attr_float("max", 0);
    } else {
      const auto bound = [&](int i) -> std::optional<double> {
        if (!cx.has_input(i)) return std::nullopt;
        const std::vector<double> v = cx.numbers(i, i == 1 ? "min" : "max");
        if (v.size() != 1) cx.unsupported("a bound with " + std::to_string(v.size()) + " values");
        return v[0];
      };
      lo = bound(1);
      hi = bound(2);
    }
    const onnx_value x = cx.tensor(0);
    if (lo == 0.0 && hi == 6.0) return cx.bind(cx.call<relu6_fn>({}, x));
    if (lo == 0.0 && !hi) return cx.bind(cx.call<relu_fn>({}, x));
    onnx_value y = x;
    if (lo) y = cx.call<maximum_fn>({}, y, Value(*lo));
    if (hi) y = cx.call<minimum_fn>({}, y, Value(*hi));
    cx.bind(y, y.node != x.node);
  }
};
inline constexpr relu6_fn relu6{};
TRACEMOD_REGISTER_BUILTIN_OP(relu6_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
