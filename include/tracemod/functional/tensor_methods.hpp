// Tensor arithmetic methods (MegEngine's x.__add__(y), x.__radd__(1), x.__neg__(), ...) and the C++
// operators on tmod::Tensor that call them. A graph records `x + y` as the method call
// `x.__add__(y, )`, distinct from the function call `elemwise.add(x, y, )`.
#pragma once

#include <tracemod/functional/elementwise.hpp>

namespace tracemod::functional {

/// self OP other (or other OP self for the reflected __rop__ forms); self is a tensor.
template <class Derived, class KernelOp, bool Reflected>
struct tensor_binary_method : broadcast_binary<Derived, KernelOp, Reflected> {
  static constexpr bool reflected = Reflected;
  static constexpr std::array operands{operand{"self", operand_kind::tensor},
                                       operand{"other", operand_kind::tensor_or_scalar}};
};

/// One tensor method op: its name (the printed method) and its base (the rule it follows).
#define TRACEMOD_DEFINE_TENSOR_METHOD(op_name, method_name, ...)   \
  struct op_name##_fn : __VA_ARGS__ {                              \
    static constexpr std::string_view name = method_name;          \
    static constexpr std::string_view target = method_name;        \
    static constexpr call_kind kind = call_kind::method;           \
  };                                                               \
  inline constexpr op_name##_fn op_name{};                         \
  TRACEMOD_REGISTER_BUILTIN_OP(op_name##_fn);

#define TRACEMOD_BINARY_METHOD(op_name, method_name, kernel, reflected) \
  TRACEMOD_DEFINE_TENSOR_METHOD(op_name, method_name, tensor_binary_method<op_name##_fn, kernels::kernel, reflected>)

TRACEMOD_BINARY_METHOD(method_add, "__add__", add_op, false)
TRACEMOD_BINARY_METHOD(method_radd, "__radd__", add_op, true)
TRACEMOD_BINARY_METHOD(method_sub, "__sub__", sub_op, false)
TRACEMOD_BINARY_METHOD(method_rsub, "__rsub__", sub_op, true)
TRACEMOD_BINARY_METHOD(method_mul, "__mul__", mul_op, false)
TRACEMOD_BINARY_METHOD(method_rmul, "__rmul__", mul_op, true)
TRACEMOD_BINARY_METHOD(method_truediv, "__truediv__", div_op, false)
TRACEMOD_BINARY_METHOD(method_rtruediv, "__rtruediv__", div_op, true)

#undef TRACEMOD_BINARY_METHOD

/// self OP= other as a graph records it (`x += y` is `x.__iadd__(y, )`): the result keeps self's
/// shape (other broadcasts into self, never self into other). In a graph it produces a new value,
/// so the interpreter never writes into a tensor that another expr or the caller still holds.
template <class Derived, class KernelOp>
struct tensor_inplace_method : op_base<Derived>, detail::elementwise_kernel<KernelOp>, detail::int_rules<Derived, KernelOp, false> {
  static constexpr bool in_place = true;
  using params = no_params;
  static constexpr std::array operands{operand{"self", operand_kind::tensor},
                                       operand{"other", operand_kind::tensor_or_scalar}};
  static constexpr std::tuple<> fields{};

  static constexpr Shape infer_shape(const params&, const Shape& self, const Shape& other) {
    if (broadcast_shapes(self, other, Derived::target) != self)
      throw shape_error(std::string(Derived::target) + ": in-place result must keep shape " + self.to_string() +
                        ", but broadcasting with " + other.to_string() + " changes it");
    return self;
  }

  template <class S, class O>
  static Tensor eager(const params& p, const S& self, const O& other) {
    if constexpr (!scalar_operand<O>) {
      require_defined(Derived::target, "self", self);
      require_defined(Derived::target, "other", other);
      static_cast<void>(infer_shape(p, self.shape(), other.shape()));
    }
    return detail::eager_binary<Derived, KernelOp>(self, other);  // checks the dtypes
  }

  static void onnx_export(onnx_export_context& cx, const params&) { detail::onnx_export_binary<KernelOp>(cx, false); }

  template <class S, class O>
  decltype(auto) operator()(const S& self, const O& other) const {
    return op_base<Derived>::apply(params{}, self, other);
  }
};

#define TRACEMOD_INPLACE_METHOD(op_name, method_name, kernel) \
  TRACEMOD_DEFINE_TENSOR_METHOD(op_name, method_name, tensor_inplace_method<op_name##_fn, kernels::kernel>)

TRACEMOD_INPLACE_METHOD(method_iadd, "__iadd__", add_op)
TRACEMOD_INPLACE_METHOD(method_isub, "__isub__", sub_op)
TRACEMOD_INPLACE_METHOD(method_imul, "__imul__", mul_op)
TRACEMOD_INPLACE_METHOD(method_itruediv, "__itruediv__", div_op)

#undef TRACEMOD_INPLACE_METHOD
#undef TRACEMOD_DEFINE_TENSOR_METHOD

/// -self
struct method_neg_fn : unary_op<method_neg_fn, kernels::neg_op> {
  static constexpr std::string_view name = "__neg__";
  static constexpr std::string_view target = "__neg__";
  static constexpr call_kind kind = call_kind::method;
  static constexpr std::array operands{operand{"self", operand_kind::tensor}};
  static constexpr std::array<std::string_view, 0> onnx_import_types{};  // Neg imports as neg_fn
};
inline constexpr method_neg_fn method_neg{};
TRACEMOD_REGISTER_BUILTIN_OP(method_neg_fn);

}  // namespace tracemod::functional

namespace tracemod {

namespace functional {

/// The types that take the tensor operators (+, -, *, / and unary -), each recorded or run as
/// MegEngine's tensor method (x + y is x.__add__(y), 1 + x is x.__radd__(1), -x is x.__neg__()):
/// tmod::Tensor and what derives from it; the typed tracer's symbolic tensors and tmod::Sym
/// specialize it beside their definitions. The method ops dispatch every mode (eager, typed trace,
/// Sym recording), so these operators are the only ones.
template <class T>
inline constexpr bool uses_tensor_operators = std::derived_from<T, Tensor>;

template <class T>
concept tensor_operator_operand = uses_tensor_operators<std::remove_cvref_t<T>>;

/// A tensor-like operand and a tensor-like operand or a number, in either order.
template <class A, class B>
concept tensor_operator_operands = (tensor_operator_operand<A> || tensor_operator_operand<B>) &&
                                   (tensor_operator_operand<A> || scalar_operand<A>) &&
                                   (tensor_operator_operand<B> || scalar_operand<B>);

}  // namespace functional

#define TRACEMOD_TENSOR_OPERATOR(op, method, rmethod)  \
  template <class A, class B>                          \
    requires functional::tensor_operator_operands<A, B> \
  auto operator op(const A& a, const B& b) {           \
    if constexpr (functional::scalar_operand<A>)       \
      return functional::rmethod(b, a);                \
    else                                               \
      return functional::method(a, b);                 \
  }

TRACEMOD_TENSOR_OPERATOR(+, method_add, method_radd)
TRACEMOD_TENSOR_OPERATOR(-, method_sub, method_rsub)
TRACEMOD_TENSOR_OPERATOR(*, method_mul, method_rmul)
TRACEMOD_TENSOR_OPERATOR(/, method_truediv, method_rtruediv)

#undef TRACEMOD_TENSOR_OPERATOR

template <functional::tensor_operator_operand A>
auto operator-(const A& a) {
  return functional::method_neg(a);
}

namespace detail {

/// a OP= b in place: the result must have a's shape (b broadcasts into a, never a into b).
template <class KernelOp, class B>
Tensor& compound_assign(Tensor& a, const B& b, std::string_view op) {
  functional::require_float32(op, "self", a);
  if constexpr (functional::scalar_operand<B>) {
    kernels::binary(KernelOp{}, a.data<float>(), static_cast<float>(b), a.data<float>(), a.numel());
  } else {
    functional::require_float32(op, "other", b);
    if (broadcast_shapes(a.shape(), b.shape(), op) != a.shape())
      throw shape_error(std::string(op) + ": in-place result must keep shape " + a.shape().to_string() +
                        ", but broadcasting with " + b.shape().to_string() + " changes it");
    if (a.shape() == b.shape())
      kernels::binary(KernelOp{}, a.data<float>(), b.template data<float>(), a.data<float>(), a.numel());
    else
      kernels::binary_broadcast(KernelOp{}, a.data<float>(), a.shape(), b.template data<float>(), b.shape(), a.data<float>(),
                                a.shape());
  }
  return a;
}

}  // namespace detail

// In place, like torch's `x += y`: every tensor sharing a's buffer sees the change.
template <class B>
  requires std::same_as<B, Tensor> || functional::scalar_operand<B>
Tensor& operator+=(Tensor& a, const B& b) { return detail::compound_assign<kernels::add_op>(a, b, "__iadd__"); }
template <class B>
  requires std::same_as<B, Tensor> || functional::scalar_operand<B>
Tensor& operator-=(Tensor& a, const B& b) { return detail::compound_assign<kernels::sub_op>(a, b, "__isub__"); }
template <class B>
  requires std::same_as<B, Tensor> || functional::scalar_operand<B>
Tensor& operator*=(Tensor& a, const B& b) { return detail::compound_assign<kernels::mul_op>(a, b, "__imul__"); }
template <class B>
  requires std::same_as<B, Tensor> || functional::scalar_operand<B>
Tensor& operator/=(Tensor& a, const B& b) { return detail::compound_assign<kernels::div_op>(a, b, "__itruediv__"); }

}  // namespace tracemod

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
