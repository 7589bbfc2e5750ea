// Comparisons, logical ops and where: the ops that make and consume bool tensors (masks).
// equal, not_equal, less, less_equal, greater, greater_equal compare two tensors of one dtype
// (float32, int32 or bool) and give bool; logical_not, logical_and, logical_or, logical_xor take
// bool and give bool; where(cond, x, y) picks x where the bool cond holds and y elsewhere. Every
// binary and ternary op broadcasts its operands as numpy does. PyTorch's and MegEngine's names and
// semantics; ONNX's Equal, Less, LessOrEqual, Greater, GreaterOrEqual, Not, And, Or, Xor and Where.
#pragma once

#include <tracemod/core/dim.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/broadcast_map.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

namespace tracemod::functional {

namespace detail {

/// "'x' (float32, shape (2, 3))": how the messages of these ops name an operand.
inline std::string operand_repr(std::string_view name, const Tensor& t) {
  return "'" + std::string(name) + "' (" + std::string(dtype_name(t.dtype())) + ", shape " + t.shape().to_string() + ")";
}

/// Rejects an operand whose dtype is not `want`, naming the op, the operand, its dtype and shape.
inline void require_dtype(std::string_view op, std::string_view name, const Tensor& t, DType want) {
  require_defined(op, name, t);
  if (t.dtype() != want)
    throw dtype_error(std::string(op) + ": operand " + operand_repr(name, t) + " must be " +
                      std::string(dtype_name(want)));
}

/// Rejects two operands of different dtypes (a comparison does not promote).
inline void require_same_dtype(std::string_view op, std::string_view na, const Tensor& a, std::string_view nb,
                               const Tensor& b) {
  require_defined(op, na, a);
  require_defined(op, nb, b);
  if (a.dtype() != b.dtype())
    throw dtype_error(std::string(op) + ": operands " + operand_repr(na, a) + " and " + operand_repr(nb, b) +
                      " have different dtypes; convert one with astype");
}

/// The symbolic broadcast of the operands' dims (what infer_dims of these ops returns).
inline Dims broadcast_all_dims(std::initializer_list<const ShapeDims*> ops, std::string_view op) {
  Dims out;
  Shape example;
  for (const ShapeDims* x : ops) {
    out = broadcast_dims(out, example, x->dims, x->shape, op);
    example = broadcast_shapes(example, x->shape, op);
  }
  return out;
}

/// The predicates of the comparison ops, and the ONNX node each is.
struct equal_pred {
  static constexpr std::string_view onnx = "Equal";
  template <class T>
  constexpr bool operator()(T a, T b) const noexcept { return a == b; }
};
struct not_equal_pred {
  static constexpr std::string_view onnx = "";  // Not(Equal)
  template <class T>
  constexpr bool operator()(T a, T b) const noexcept { return a != b; }
};
struct less_pred {
  static constexpr std::string_view onnx = "Less";
  template <class T>
  constexpr bool operator()(T a, T b) const noexcept { return a < b; }
};
struct less_equal_pred {
  static constexpr std::string_view onnx = "LessOrEqual";
  template <class T>
  constexpr bool operator()(T a, T b) const noexcept { return a <= b; }
};
struct greater_pred {
  static constexpr std::string_view onnx = "Greater";
  template <class T>
  constexpr bool operator()(T a, T b) const noexcept { return a > b; }
};
struct greater_equal_pred {
  static constexpr std::string_view onnx = "GreaterOrEqual";
  template <class T>
  constexpr bool operator()(T a, T b) const noexcept { return a >= b; }
};
struct and_pred {
  static constexpr std::string_view onnx = "And";
  constexpr bool operator()(bool a, bool b) const noexcept { return a && b; }
};
struct or_pred {
  static constexpr std::string_view onnx = "Or";
  constexpr bool operator()(bool a, bool b) const noexcept { return a || b; }
};
struct xor_pred {
  static constexpr std::string_view onnx = "Xor";
  constexpr bool operator()(bool a, bool b) const noexcept { return a != b; }
};

}  // namespace detail

/// pred(x, y) elementwise with numpy broadcasting, as bool. `Logical`: the operands must be bool
/// (logical_and, ...); otherwise they must share a dtype (the comparisons).
template <class Derived, class Pred, bool Logical>
struct predicate_op : op_base<Derived> {
  using params = no_params;
  static constexpr std::array operands{operand{"x", operand_kind::tensor}, operand{"y", operand_kind::tensor}};
  static constexpr std::tuple<> fields{};

  static constexpr Shape infer_shape(const params&, const Shape& a, const Shape& b) {
    return broadcast_shapes(a, b, Derived::target);
  }
  static Dims infer_dims(const params&, const ShapeDims& a, const ShapeDims& b) {
    return detail::broadcast_all_dims({&a, &b}, Derived::target);
  }
  static DType infer_dtype(const params*, std::span<const DType>) { return DType::boolean; }

  static Tensor eager(const params&, const Tensor& a, const Tensor& b) {
    if constexpr (Logical) {
      detail::require_dtype(Derived::target, "x", a, DType::boolean);
      detail::require_dtype(Derived::target, "y", b, DType::boolean);
    } else {
      detail::require_same_dtype(Derived::target, "x", a, "y", b);
    }
    const Shape out = broadcast_shapes(a.shape(), b.shape(), Derived::target);
    Tensor y = Tensor::empty(out, DType::boolean, Derived::target);
    visit_dtype(a.dtype(), [&]<class T>(T) {
      kernels::broadcast_map(out, y.data<bool>(), Pred{}, {a.shape(), b.shape()}, a.template data<T>(),
                             b.template data<T>());
    });
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params&) {
    if constexpr (Pred::onnx.empty()) {  // not_equal: Not(Equal(x, y))
      const std::string eq = cx.node1("Equal", {cx.input(0).name, cx.input(1).name}, cx.fresh(cx.output() + "_equal"));
      cx.node("Not", {eq}, {cx.output()});
    } else {
      cx.node(std::string(Pred::onnx), {cx.input(0).name, cx.input(1).name}, {cx.output()});
    }
  }
};

#define TRACEMOD_DEFINE_PREDICATE_OP(op_name, pred, logical)                                                    \
  struct op_name##_fn : predicate_op<op_name##_fn, detail::pred, logical> {                                     \
    static constexpr std::string_view name = #op_name;                                                          \
    static constexpr std::string_view target = "elemwise." #op_name;                                           \
    static constexpr call_kind kind = call_kind::function;                                                      \
    static constexpr std::array onnx_import_types{detail::pred::onnx};                                          \
    static void onnx_import(onnx_import_context& cx) { cx.bind(cx.call<op_name##_fn>({}, cx.tensor(0), cx.tensor(1))); } \
  };                                                                                                             \
  inline constexpr op_name##_fn op_name{};                                                                       \
  TRACEMOD_REGISTER_BUILTIN_OP(op_name##_fn);

TRACEMOD_DEFINE_PREDICATE_OP(equal, equal_pred, false)
TRACEMOD_DEFINE_PREDICATE_OP(less, less_pred, false)
TRACEMOD_DEFINE_PREDICATE_OP(less_equal, less_equal_pred, false)
TRACEMOD_DEFINE_PREDICATE_OP(greater, greater_pred, false)
TRACEMOD_DEFINE_PREDICATE_OP(greater_equal, greater_equal_pred, false)
TRACEMOD_DEFINE_PREDICATE_OP(logical_and, and_pred, true)
TRACEMOD_DEFINE_PREDICATE_OP(logical_or, or_pred, true)
TRACEMOD_DEFINE_PREDICATE_OP(logical_xor, xor_pred, true)

#undef TRACEMOD_DEFINE_PREDICATE_OP

/// x != y (ONNX has no node of its own: it exports as Not(Equal), and imports as that pair).
struct not_equal_fn : predicate_op<not_equal_fn, detail::not_equal_pred, false> {
  static constexpr std::string_view name = "not_equal";
  static constexpr std::string_view target = "elemwise.not_equal";
  static constexpr call_kind kind = call_kind::function;
};
inline constexpr not_equal_fn not_equal{};
TRACEMOD_REGISTER_BUILTIN_OP(not_equal_fn);

/// !x elementwise on a bool tensor.
struct logical_not_fn : op_base<logical_not_fn> {
  static constexpr std::string_view name = "logical_not";
  static constexpr std::string_view target = "elemwise.logical_not";
  static constexpr call_kind kind = call_kind::function;
  using params = no_params;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  static constexpr std::tuple<> fields{};

  static constexpr Shape infer_shape(const params&, const Shape& x) { return x; }
  static Dims infer_dims(const params&, const ShapeDims& x) { return x.dims; }
  static DType infer_dtype(const params*, std::span<const DType>) { return DType::boolean; }

  static Tensor eager(const params&, const Tensor& x) {
    detail::require_dtype(target, "inp", x, DType::boolean);
    Tensor y = Tensor::empty(x.shape(), DType::boolean, target);
    const bool* in = x.data<bool>();
    bool* out = y.data<bool>();
    for (std::int64_t i = 0; i < x.numel(); ++i) out[i] = !in[i];
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params&) { cx.node("Not", {cx.input(0).name}, {cx.output()}); }
  static constexpr std::array onnx_import_types{std::string_view("Not")};
  static void onnx_import(onnx_import_context& cx) { onnx_import_unary<logical_not_fn>(cx); }
};
inline constexpr logical_not_fn logical_not{};
TRACEMOD_REGISTER_BUILTIN_OP(logical_not_fn);

/// x where cond holds, y elsewhere (PyTorch's torch.where(cond, x, y), MegEngine's F.where): cond is
/// bool, x and y share a dtype, and the three broadcast together.
struct where_fn : op_base<where_fn> {
  static constexpr std::string_view name = "where";
  static constexpr std::string_view target = "tensor.where";
  static constexpr call_kind kind = call_kind::function;
  using params = no_params;
  static constexpr std::array operands{operand{"mask", operand_kind::tensor}, operand{"x", operand_kind::tensor},
                                       operand{"y", operand_kind::tensor}};
  static constexpr std::tuple<> fields{};

  static constexpr Shape infer_shape(const params&, const Shape& c, const Shape& x, const Shape& y) {
    if (!broadcastable(c, x) || !broadcastable(c, y) || !broadcastable(x, y) ||
        !broadcastable(broadcast_shapes(c, x, target), y))
      throw shape_error(std::string(target) + ": shapes " + c.to_string() + " (mask), " + x.to_string() + " (x) and " +
                        y.to_string() + " (y) cannot be broadcast together");
    return broadcast_shapes(broadcast_shapes(c, x, target), y, target);
  }
  static Dims infer_dims(const params&, const ShapeDims& c, const ShapeDims& x, const ShapeDims& y) {
    return detail::broadcast_all_dims({&c, &x, &y}, target);
  }
  /// x's dtype (the operands' dtypes: mask, x, y); given one dtype, that one (the op takes any).
  static DType infer_dtype(const params*, std::span<const DType> in) {
    if (in.size() > 1) return in[1];
    return in.empty() ? DType::float32 : in.front();
  }

  static Tensor eager(const params& p, const Tensor& c, const Tensor& x, const Tensor& y) {
    detail::require_dtype(target, "mask", c, DType::boolean);
    detail::require_same_dtype(target, "x", x, "y", y);
    const Shape out = infer_shape(p, c.shape(), x.shape(), y.shape());
    Tensor r = Tensor::empty(out, x.dtype(), target);
    visit_dtype(x.dtype(), [&]<class T>(T) {
      kernels::broadcast_map(
          out, r.template data<T>(), [](bool m, T a, T b) { return m ? a : b; }, {c.shape(), x.shape(), y.shape()},
          c.data<bool>(), x.template data<T>(), y.template data<T>());
    });
    return r;
  }

  static void onnx_export(onnx_export_context& cx, const params&) {
    cx.node("Where", {cx.input(0).name, cx.input(1).name, cx.input(2).name}, {cx.output()});
  }
  static constexpr std::array onnx_import_types{std::string_view("Where")};
  static void onnx_import(onnx_import_context& cx) {
    cx.bind(cx.call<where_fn>({}, cx.tensor(0), cx.tensor(1), cx.tensor(2)));
  }

};
inline constexpr where_fn where{};
TRACEMOD_REGISTER_BUILTIN_OP(where_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
