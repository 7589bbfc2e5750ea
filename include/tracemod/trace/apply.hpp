// Recording a functional op on symbolic operands: the overload of tracemod_apply that op_base::apply
// finds by argument-dependent lookup, with compile-time shape checks where shapes are static, and
// the tensor operators of symbolic tensors.
#pragma once

#include <tracemod/core/meta.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/nn/parameter.hpp>
#include <tracemod/trace/context.hpp>
#include <tracemod/trace/node.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

template <tracemod::trace::symbolic T>
inline constexpr bool tracemod::functional::uses_tensor_operators<T> = true;

namespace tracemod::trace {

namespace detail {

/// A list operand (concat's inputs) is a std::tuple of tensors and symbolic tensors.
template <class T>
inline constexpr bool is_operand_list_v = false;
template <class... T>
inline constexpr bool is_operand_list_v<std::tuple<T...>> = ((symbolic<T> || std::derived_from<T, Tensor>) && ...);

/// A tensor that is a Parameter or Buffer of the module enters as a GetAttr; any other tensor is frozen
/// into the graph as a Constant.
template <class T>
inline constexpr bool is_attribute_tensor_v = std::derived_from<T, Parameter> || std::derived_from<T, Buffer>;

}  // namespace detail

/// The operand a node stores for an argument (void for anything traceable_operand rejects).
template <class A>
auto to_operand(const A& a) {
  if constexpr (symbolic<A> || is_constant_scalar_v<A> || std::same_as<A, none_t>) {
    return a;
  } else if constexpr (functional::scalar_operand<A>) {
    return scalar_leaf::of(a);
  } else if constexpr (detail::is_attribute_tensor_v<A>) {
    std::optional<std::string> path = detail::tensor_path(a);
    const Tensor* source = path ? static_cast<const Tensor*>(&a) : nullptr;
    return attr_node<A>{{}, Tensor(a), std::move(path).value_or(""), a.shape(), source};
  } else if constexpr (std::derived_from<A, Tensor>) {
    return constant_node{{}, Tensor(a), a.shape()};
  } else if constexpr (detail::is_operand_list_v<A>) {
    return std::apply([](const auto&... e) { return std::tuple{to_operand(e)...}; }, a);
  }
}

template <class A>
using operand_t = decltype(to_operand(std::declval<const A&>()));

/// What a traced op accepts as an argument: symbolic tensors, tensors, numbers, tmod::none, and
/// tuples of tensors (concat). Anything else leaves tracemod_apply out of overload resolution, so
/// op_base::apply reports the one readable error.
template <class A>
concept traceable_operand = symbolic<A> || std::derived_from<A, Tensor> || functional::scalar_operand<A> ||
                            std::same_as<A, none_t> || detail::is_operand_list_v<A>;

namespace detail {

/// Trace-time shape of an operand (a scalar is rank 0).
template <class N>
Shape runtime_shape(const N& n) {
  if constexpr (symbolic<N>)
    return n.shape;
  else
    return Shape{};
}

/// Static shape information of an operand: scalars are static rank-0; none and lists are not shapes.
template <class N>
struct operand_shape_info {
  using type = dynamic_dims;
};
template <symbolic N>
struct operand_shape_info<N> {
  using type = typename N::shape_info;
};
template <>
struct operand_shape_info<scalar_leaf> {
  using type = static_dims<>;
};
template <std::int64_t Num, std::int64_t Den>
struct operand_shape_info<constant_scalar<Num, Den>> {
  using type = static_dims<>;
};

template <class N>
using shape_info_t = typename operand_shape_info<N>::type;

/// Whether an op's output shape follows from its operands' shapes alone: it has no params, or it
/// declares `static constexpr bool shape_ignores_params = true;` (astype).
template <class Op, class P>
inline constexpr bool shape_from_operands_v = std::same_as<P, functional::no_params> ||
                                              requires { requires Op::shape_ignores_params; };

template <class Op, class P, class... Args>
inline constexpr bool all_static_v = shape_from_operands_v<Op, P> && (shape_info_t<Args>::is_static && ...);

/// Calls Op::infer_shape with each operand in the form its kind asks for: a Shape, a pointer to a
/// Shape for optional tensors (null for none), a span of Shapes for lists.
template <class Op, class P, class Tuple, std::size_t... I>
Shape infer(const P& params, const Tuple& operands, std::index_sequence<I...>) {
  std::array<Shape, sizeof...(I)> shapes{};
  std::array<std::vector<Shape>, sizeof...(I)> lists{};
  const auto arg = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
    using N = std::tuple_element_t<K, Tuple>;
    const N& n = std::get<K>(operands);
    if constexpr (Op::operands[K].kind == functional::operand_kind::tensor_list) {
      std::apply([&](const auto&... e) { (lists[K].push_back(e.shape), ...); }, n);
      return std::span<const Shape>(lists[K]);
    } else if constexpr (Op::operands[K].kind == functional::operand_kind::optional_tensor) {
      if constexpr (std::same_as<N, none_t>) {
        return static_cast<const Shape*>(nullptr);
      } else {
        shapes[K] = n.shape;
        return static_cast<const Shape*>(&shapes[K]);
      }
    } else {
      return runtime_shape(n);
    }
  };
  return Op::infer_shape(params, arg(std::integral_constant<std::size_t, I>{})...);
}

/// A static operand as Op::infer_shape takes it: the Shape, or a pointer to it for optional tensors.
template <class Op, std::size_t K>
constexpr auto static_operand(const Shape& s) {
  if constexpr (Op::operands[K].kind == functional::operand_kind::optional_tensor)
    return &s;
  else
    return s;
}

/// The static output shape of an op with no params whose operands all have static shapes.
template <class Op, class... Args, std::size_t... K>
consteval Shape static_infer(std::index_sequence<K...>) {
  const std::array<Shape, sizeof...(Args)> shapes{shape_info_t<Args>::value...};
  return Op::infer_shape(typename Op::params{}, static_operand<Op, K>(shapes[K])...);
}

template <class Op, class Seq>
struct static_result;
template <class Op, class... Args>
struct static_result<Op, std::tuple<Args...>> {
  static constexpr Shape shape = static_infer<Op, Args...>(std::index_sequence_for<Args...>{});
  template <std::size_t... I>
  static auto dims(std::index_sequence<I...>) -> static_dims<shape[I]...>;
  using type = decltype(dims(std::make_index_sequence<shape.rank()>{}));
};

template <class Op>
concept elementwise_binary_op = requires { typename Op::kernel_op; } && Op::operands.size() == 2;

/// Readable compile-time errors for static shapes that no params can make work; false after such an
/// error, so that no static output shape is computed from them (one error, not a cascade). Binary
/// elementwise ops broadcast; any other op may check its static shapes itself (check_static_shapes).
template <class Op, class... Args>
constexpr bool check_static_shapes() {
  using ops = std::tuple<Args...>;
  if constexpr (elementwise_binary_op<Op>) {
    using A = shape_info_t<std::tuple_element_t<0, ops>>;
    using B = shape_info_t<std::tuple_element_t<1, ops>>;
    if constexpr (A::is_static && B::is_static) {
      static_assert(broadcastable(A::value, B::value),
                    "tmod::symbolic_trace: the static shapes of an elementwise op's operands cannot be broadcast "
                    "together; fix the tmod::spec<...> shapes (numpy rules: trailing extents equal or 1)");
      return broadcastable(A::value, B::value);
    }
  } else if constexpr (requires { Op::template check_static_shapes<shape_info_t<Args>...>(); }) {
    return Op::template check_static_shapes<shape_info_t<Args>...>();
  }
  return true;
}

template <class T>
struct lazy_dynamic {
  using type = dynamic_dims;
};

/// The dtype of a typed operand, as the runtime graph states it: an op that states its dtype rule
/// (infer_dtype: int32 shape arithmetic, GetVarShape, astype) applies it to its operands' dtypes,
/// one that moves any dtype keeps its first operand's, any other op gives float32, as inputs do. A
/// constant or attribute has its tensor's dtype; numbers and None have none (nullopt).
template <class N>
std::optional<DType> typed_dtype(const N& n);

/// Op's output dtype on operands `args`, by the rule typed_dtype states; throws as the op's rule does
/// (an int32 operand of true division is a dtype_error while tracing, as while recording).
template <class Op, class P, class... Args>
DType typed_call_dtype(const P& params, const std::tuple<Args...>& args) {
  if constexpr (requires(const P* p, std::span<const DType> d) { Op::infer_dtype(p, d); }) {
    std::vector<DType> in;
    std::apply([&](const auto&... a) { (..., [&] { if (const auto d = typed_dtype(a)) in.push_back(*d); }()); }, args);
    return Op::infer_dtype(&params, in);
  } else if constexpr (requires { requires Op::any_dtype; } && sizeof...(Args) > 0) {
    return typed_dtype(std::get<0>(args)).value_or(DType::float32);
  } else {
    return DType::float32;
  }
}

template <class N>
std::optional<DType> typed_dtype(const N& n) {
  if constexpr (requires { typename N::op; })
    return typed_call_dtype<typename N::op>(n.params, n.args);
  else if constexpr (std::same_as<N, constant_node>)
    return n.value.dtype();
  else if constexpr (requires { n.current(); })
    return n.current().dtype();
  else if constexpr (symbolic<N>)
    return DType::float32;
  else
    return std::nullopt;  // a number, None, or a list (concat's inputs share their dtype check at run time)
}

/// Records a call of Op on typed operands: the shape inferred now, statically where it can be.
template <class Op, class P, class... A>
auto record_typed(const P& params, const A&... args) {
  using operands_type = std::tuple<operand_t<A>...>;
  constexpr bool shapes_agree = check_static_shapes<Op, operand_t<A>...>();
  using shape_info = typename std::conditional_t<shapes_agree && all_static_v<Op, P, operand_t<A>...>,
                                                 static_result<Op, operands_type>, lazy_dynamic<Op>>::type;
  operands_type operands{to_operand(args)...};
  Shape shape = infer<Op>(params, operands, std::index_sequence_for<A...>{});
  (void)typed_call_dtype<Op>(params, operands);
  (void)Tensor::byte_size(shape, DType::float32, Op::target);  // an output no allocation can hold fails now
  return op_node<Op, P, shape_info, operand_t<A>...>{{}, params, std::move(operands), shape, next_call_id(Op::target)};
}

}  // namespace detail

/// Records a call of Op on operands of which at least one is symbolic (found by op_base::apply
/// through argument-dependent lookup).
template <class Op, class P, traceable_operand... A>
auto tracemod_apply(Op, const P& params, const A&... args) {
  constexpr bool reads_shape_value =
      std::any_of(Op::operands.begin(), Op::operands.end(),
                  [](const functional::operand& o) { return o.kind == functional::operand_kind::shape_value; });
  static_assert(!reads_shape_value,
                "tmod::symbolic_trace: this op reads a shape computed as a value (F::reshape_to), which a typed "
                "graph cannot hold: its shapes are static, so pass the target shape as a list (F::reshape)");
  if constexpr (!reads_shape_value)
    return detail::record_typed<Op>(params, args...);
  else  // after the assertion, a node of the first operand keeps the rest of the trace quiet
    return [](const auto& first, const auto&...) { return to_operand(first); }(args...);
}

// Symbolic tensors take the library's tensor operators (functional/tensor_methods.hpp); ADL finds
// them here.
using tracemod::operator+;
using tracemod::operator-;
using tracemod::operator*;
using tracemod::operator/;

// Comparisons would decide control flow on values that do not exist while tracing.
#define TRACEMOD_SYMBOLIC_COMPARISON(op)                                                                       \
  template <class A, class B>                                                                                  \
    requires(symbolic<A> || symbolic<B>)                                                                       \
  bool operator op(const A&, const B&) {                                                                       \
    static_assert(::tracemod::detail::always_false_v<A, B>,                                                                \
                  "tmod::symbolic_trace: a comparison (==, <, ...) of symbolic tensors gives no bool while "           \
                  "tracing; use F::greater/F::equal/... with F::where, F::maximum/F::minimum, or the run-time tracer for data-dependent "             \
                  "control flow");                                                                                     \
    return false;                                                                                              \
  }

TRACEMOD_SYMBOLIC_COMPARISON(<)
TRACEMOD_SYMBOLIC_COMPARISON(>)
TRACEMOD_SYMBOLIC_COMPARISON(<=)
TRACEMOD_SYMBOLIC_COMPARISON(>=)
TRACEMOD_SYMBOLIC_COMPARISON(==)
TRACEMOD_SYMBOLIC_COMPARISON(!=)

#undef TRACEMOD_SYMBOLIC_COMPARISON

}  // namespace tracemod::trace
