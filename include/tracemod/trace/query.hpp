// Compile-time queries on typed graphs (usable in static_assert): node counts, the ops in execution
// order, op counts, static output shapes, the user-module sub-graphs.
#pragma once

#include <tracemod/trace/typed_graph.hpp>
#include <tracemod/trace/node.hpp>

#include <boost/hana/append.hpp>
#include <boost/hana/concat.hpp>
#include <boost/hana/flatten.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include <cstddef>
#include <tuple>
#include <type_traits>

namespace tracemod::trace {

namespace detail {

namespace hana = boost::hana;

/// Nodes of the tree rooted at N (every input, attribute, constant and call; scalars are const
/// values of their call, not nodes). A user-module call counts as one node plus its sub-graph's nodes.
template <class N>
consteval std::size_t count_nodes() {
  if constexpr (is_tuple_v<N>) {
    return []<class... T>(std::type_identity<std::tuple<T...>>) { return (count_nodes<T>() + ... + 0); }(
        std::type_identity<N>{});
  } else if constexpr (!symbolic<N>) {
    return 0;
  } else if constexpr (N::kind == node_kind::output) {
    return count_nodes<typename N::call_type>();
  } else if constexpr (requires { typename N::graph_type; }) {
    return 1 + count_nodes<typename N::graph_type::output_type>() + count_nodes<decltype(std::declval<N>().args)>();
  } else if constexpr (requires { std::declval<N>().args; }) {
    return 1 + count_nodes<decltype(std::declval<N>().args)>();
  } else {
    return 1;
  }
}

/// The op tags of the calls under N in execution order (operands first, left to right): functional
/// op types for op calls, module types for builtin module calls; a user-module call contributes its
/// sub-graph's ops.
template <class N>
constexpr auto ops_in() {
  if constexpr (is_tuple_v<N>) {
    return []<class... T>(std::type_identity<std::tuple<T...>>) {
      return hana::flatten(hana::make_tuple(ops_in<T>()...));
    }(std::type_identity<N>{});
  } else if constexpr (!symbolic<N>) {
    return hana::make_tuple();
  } else if constexpr (N::kind == node_kind::output) {
    return ops_in<typename N::call_type>();
  } else if constexpr (requires { typename N::graph_type; }) {
    return hana::concat(ops_in<decltype(std::declval<N>().args)>(), ops_in<typename N::graph_type::output_type>());
  } else if constexpr (requires { typename N::op; }) {
    return hana::append(ops_in<decltype(std::declval<N>().args)>(), hana::type_c<typename N::op>);
  } else if constexpr (requires { typename N::module_type; }) {
    return hana::append(ops_in<decltype(std::declval<N>().args)>(), hana::type_c<typename N::module_type>);
  } else {
    return hana::make_tuple();
  }
}

template <class Tag, class N>
consteval std::size_t count_tag() {
  std::size_t n = 0;
  hana::for_each(ops_in<N>(), [&](auto t) {
    if (std::is_same_v<typename decltype(t)::type, Tag>) ++n;
  });
  return n;
}

/// The user-module calls directly under N (not inside their own sub-graphs), as hana types.
template <class N>
constexpr auto submodule_calls_in() {
  if constexpr (is_tuple_v<N>) {
    return []<class... T>(std::type_identity<std::tuple<T...>>) {
      return hana::flatten(hana::make_tuple(submodule_calls_in<T>()...));
    }(std::type_identity<N>{});
  } else if constexpr (!symbolic<N>) {
    return hana::make_tuple();
  } else if constexpr (N::kind == node_kind::output) {
    return submodule_calls_in<typename N::call_type>();
  } else if constexpr (requires { typename N::graph_type; }) {
    return hana::append(submodule_calls_in<decltype(std::declval<N>().args)>(), hana::type_c<N>);
  } else if constexpr (requires { std::declval<N>().args; }) {
    return submodule_calls_in<decltype(std::declval<N>().args)>();
  } else {
    return hana::make_tuple();
  }
}

}  // namespace detail

// Each query takes the graph object, or only its type (`tmod::node_count<decltype(g)>()`), which is
// what a static_assert on a graph received by reference needs.

/// Number of nodes of the graph (inputs used, attributes, constants, calls, sub-graph nodes).
template <class G>
constexpr std::size_t node_count() {
  return detail::count_nodes<typename G::output_type>();
}
template <class G>
constexpr std::size_t node_count(const G&) {
  return node_count<G>();
}

/// The op tags in execution order, as a boost::hana::tuple of hana::type.
template <class G>
constexpr auto ops_of(const G&) {
  return detail::ops_in<typename G::output_type>();
}

/// How many calls of Op (a functional op type such as F::relu_fn, or a builtin module type).
template <class Op, class G>
constexpr std::size_t count_ops() {
  return detail::count_tag<Op, typename G::output_type>();
}
template <class Op, class G>
constexpr std::size_t count_ops(const G&) {
  return count_ops<Op, G>();
}

template <class Op, class G>
constexpr bool contains_op(const G& g) {
  return count_ops<Op>(g) > 0;
}

/// Whether the (single) output's shape is known at compile time.
template <class G>
constexpr bool has_static_output_shape(const G&) {
  return G::output_shape_info::is_static;
}

/// The output's static shape; a compile error when it is not static.
template <class G>
constexpr Shape static_output_shape(const G&) {
  static_assert(G::output_shape_info::is_static,
                "tmod::static_output_shape: the graph's output shape is not static; trace with tmod::spec<...>() "
                "inputs and ops whose output shape follows from shapes alone");
  return G::output_shape_info::value;
}

/// The user-module calls of the top graph (hana tuple of node types; each has ::module_type and
/// ::graph_type, the sub-graph).
template <class G>
constexpr auto submodules_of(const G&) {
  return detail::submodule_calls_in<typename G::output_type>();
}

}  // namespace tracemod::trace
