// Compile-time rewrites of typed graphs. tmod::simplify(g) returns a new typed graph whose type is the
// rewritten graph; the rules are overloads on node types (Boost.YAP's transforms), applied bottom-up
// until none matches:
//   scale chains   (x * a) * b -> x * (a * b)          for scalars a, b (any of x*a, a*x, F::mul)
//   shift chains   (x + a) + b -> x + (a + b)          (x - a counts as x + (-a); 3 + (x - 1) -> x + 2)
//   identities     x * c<1>, x / c<1>, x + c<0>, x - c<0> -> x   (the scalar must be a compile-time tmod::c<N, D>)
//   idempotence    f(f(x)) -> f(x) for ops declared idempotent (relu)
// The rules read the ops' facts (functional/op.hpp: arith, reflected, in_place, idempotent), so they
// apply to any op that declares them.
// Folding a chain reassociates float arithmetic: results equal the original within rounding (exactly,
// when the scalars are powers of two). Chains of compile-time constants fold exactly, as fractions. A folded node keeps the id of the outermost call it replaces.
#pragma once

#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/trace/typed_graph.hpp>
#include <tracemod/trace/node.hpp>

#include <tuple>
#include <type_traits>
#include <utility>

namespace tracemod::trace {

namespace detail {

namespace F = tracemod::functional;

template <class N>
inline constexpr bool is_scalar_v = std::same_as<N, scalar_leaf> || is_constant_scalar_v<N>;

/// Recognises `tensor (x) scalar` calls: which operand is the tensor, and the operation's role.
enum class affine_role { none, scale, shift, unshift, divide };

template <class Op>
constexpr affine_role role_of() {
  if constexpr (!requires { Op::arith; } || F::in_place_of<Op>()) {
    return affine_role::none;
  } else {
    constexpr bool reflected = requires { requires Op::reflected; };
    if constexpr (Op::arith == F::arith_kind::mul)
      return affine_role::scale;
    else if constexpr (Op::arith == F::arith_kind::add)
      return affine_role::shift;
    else if constexpr (Op::arith == F::arith_kind::sub && !reflected)
      return affine_role::unshift;  // x - a
    else if constexpr (Op::arith == F::arith_kind::div && !reflected)
      return affine_role::divide;  // x / a
    else
      return affine_role::none;
  }
}

/// N is `x (role) scalar` with the tensor operand at index T and the scalar at 1 - T.
template <class N>
struct affine_match {
  static constexpr affine_role role = affine_role::none;
  static constexpr bool value = false;
};
template <class Op, class P, class S, class A, class B>
struct affine_match<op_node<Op, P, S, A, B>> {
  static constexpr affine_role role = role_of<Op>();
  // Commutative roles take the scalar on either side; x - a and x / a only on the right.
  static constexpr bool scalar_right = symbolic<A> && is_scalar_v<B>;
  static constexpr bool scalar_left = is_scalar_v<A> && symbolic<B> &&
                                      (role == affine_role::scale || role == affine_role::shift);
  static constexpr bool value = role != affine_role::none && (scalar_right || scalar_left);
  static constexpr std::size_t tensor_index = scalar_right ? 0 : 1;
};

template <class N>
inline constexpr bool is_affine_v = affine_match<N>::value;
template <class N>
inline constexpr affine_role role_v = affine_match<N>::role;

template <class N>
const auto& tensor_of(const N& n) {
  return std::get<affine_match<N>::tensor_index>(n.args);
}
template <class N>
const auto& scalar_of(const N& n) {
  return std::get<1 - affine_match<N>::tensor_index>(n.args);
}

// Scalar arithmetic that stays compile-time when both sides are.
template <class A, class B>
constexpr auto scalar_mul(const A& a, const B& b) {
  if constexpr (is_constant_scalar_v<A> && is_constant_scalar_v<B>)
    return constant_scalar_t<A::num * B::num, A::den * B::den>{};
  else
    return scalar_leaf{static_cast<float>(a.value) * static_cast<float>(b.value)};
}
template <class A, class B>
constexpr auto scalar_add(const A& a, const B& b) {
  if constexpr (is_constant_scalar_v<A> && is_constant_scalar_v<B>)
    return constant_scalar_t<A::num * B::den + B::num * A::den, A::den * B::den>{};
  else
    return scalar_leaf{static_cast<float>(a.value) + static_cast<float>(b.value)};
}
template <class A>
constexpr auto scalar_neg(const A& a) {
  if constexpr (is_constant_scalar_v<A>)
    return constant_scalar_t<-A::num, A::den>{};
  else
    return scalar_leaf{-a.value};
}

/// The signed shift of a shift/unshift node.
template <class N>
constexpr auto signed_shift(const N& n) {
  if constexpr (role_v<N> == affine_role::unshift)
    return scalar_neg(scalar_of(n));
  else
    return scalar_of(n);
}

/// x (op) s as a tensor method call with the id of the call it replaces.
template <class Op, class X, class Sc>
auto make_scalar_call(const X& x, const Sc& s, const Shape& shape, std::uint32_t id) {
  return op_node<Op, F::no_params, typename X::shape_info, X, Sc>{{}, {}, std::tuple{x, s}, shape, id};
}

template <class N>
auto apply_rules(const N& n);

template <class X, class Sc>
constexpr bool is_identity_scalar(affine_role role) {
  if constexpr (is_constant_scalar_v<Sc>) {
    if (role == affine_role::scale || role == affine_role::divide) return Sc::num == 1 && Sc::den == 1;
    return Sc::num == 0;
  } else {
    return false;
  }
}

template <class N>
auto apply_rules(const N& n) {
  if constexpr (is_affine_v<N>) {
    using X = std::remove_cvref_t<decltype(tensor_of(n))>;
    using Sc = std::remove_cvref_t<decltype(scalar_of(n))>;
    constexpr affine_role role = role_v<N>;
    if constexpr (is_identity_scalar<X, Sc>(role)) {
      return tensor_of(n);
    } else if constexpr (role == affine_role::scale && is_affine_v<X> && role_v<X> == affine_role::scale) {
      const X& inner = tensor_of(n);
      return apply_rules(make_scalar_call<F::method_mul_fn>(tensor_of(inner), scalar_mul(scalar_of(inner), scalar_of(n)),
                                                            n.shape, n.id));
    } else if constexpr ((role == affine_role::shift || role == affine_role::unshift) && is_affine_v<X> &&
                         (role_v<X> == affine_role::shift || role_v<X> == affine_role::unshift)) {
      const X& inner = tensor_of(n);
      return apply_rules(make_scalar_call<F::method_add_fn>(
          tensor_of(inner), scalar_add(signed_shift(inner), signed_shift(n)), n.shape, n.id));
    } else {
      return n;
    }
  } else if constexpr (requires { typename N::op; }) {
    using X = std::tuple_element_t<0, std::remove_cvref_t<decltype(n.args)>>;
    using Op = typename N::op;
    if constexpr (F::idempotent_of<Op>() && std::same_as<typename Op::params, F::no_params> &&
                  requires { typename X::op; }) {
      if constexpr (std::same_as<typename X::op, Op>)
        return std::get<0>(n.args);
      else
        return n;
    } else {
      return n;
    }
  } else {
    return n;
  }
}

template <class N>
auto simplify_node(const N& n);

// Plain index folds rather than std::apply: one template instantiation level per tree level, so
// long chains stay far below the compiler's template depth limit.
template <class... T, std::size_t... I>
auto simplify_each(const std::tuple<T...>& t, std::index_sequence<I...>) {
  return std::tuple{simplify_node(std::get<I>(t))...};
}
template <class... T>
auto simplify_all(const std::tuple<T...>& t) {
  return simplify_each(t, std::index_sequence_for<T...>{});
}

template <class N, class... A>
auto rebuild_op(const N& n, std::tuple<A...> args) {
  return op_node<typename N::op, std::remove_cvref_t<decltype(n.params)>, typename N::shape_info, A...>{
      {}, n.params, std::move(args), n.shape, n.id};
}
template <class N, class G, class... A>
auto rebuild_module_call(const N& n, G sub, std::tuple<A...> args) {
  return module_call_node<typename N::module_type, G, A...>{{}, n.module, n.name, std::move(sub), std::move(args),
                                                            n.shape, n.id};
}
template <class N, class... A>
auto rebuild_builtin_call(const N& n, std::tuple<A...> args) {
  return builtin_call_node<typename N::module_type, A...>{{}, n.module, n.name, std::move(args), n.shape, n.id};
}

template <class G>
auto simplify_graph(const G& g);

template <class N>
auto simplify_node(const N& n) {
  if constexpr (!symbolic<N>) {
    if constexpr (is_tuple_v<N>)
      return simplify_all(n);
    else
      return n;
  } else if constexpr (requires { typename N::op; }) {
    return apply_rules(rebuild_op(n, simplify_all(n.args)));
  } else if constexpr (requires { typename N::graph_type; }) {
    return rebuild_module_call(n, simplify_graph(n.graph), simplify_all(n.args));
  } else if constexpr (requires { typename N::module_type; }) {
    return rebuild_builtin_call(n, simplify_all(n.args));
  } else if constexpr (N::kind == node_kind::output) {
    auto call = simplify_node(n.call);
    return output_node<N::index, decltype(call)>{{}, call, n.shape};
  } else {
    return n;
  }
}

template <class G>
auto simplify_graph(const G& g) {
  auto out = simplify_node(g.output());
  return std::apply(
      [&](const auto&... in) {
        return typed_graph<decltype(out), std::remove_cvref_t<decltype(in)>...>{out, g.inputs(), g.call_count(), g.module()};
      },
      g.inputs());
}

}  // namespace detail

/// The typed graph with every rewrite rule applied (see the top of this file).
template <class G>
auto simplify(const G& g) {
  return detail::simplify_graph(g);
}

}  // namespace tracemod::trace

namespace tracemod {
using trace::simplify;
}  // namespace tracemod
