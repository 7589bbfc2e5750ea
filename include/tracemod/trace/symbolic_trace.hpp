// tmod::symbolic_trace(m, specs...): runs m's forward (or any generic callable) on symbolic inputs
// and returns the typed graph it builds.
#pragma once

#include <tracemod/trace/context.hpp>
#include <tracemod/trace/typed_graph.hpp>
#include <tracemod/trace/module_trace.hpp>
#include <tracemod/trace/node.hpp>
#include <tracemod/trace/spec.hpp>

#include <tuple>
#include <type_traits>
#include <utility>

namespace tracemod::trace {

namespace detail {

template <class Spec>
struct spec_shape_info {
  using type = dynamic_dims;
};
template <std::int64_t... D>
struct spec_shape_info<static_spec<D...>> {
  using type = static_dims<D...>;
};

template <std::size_t I, class Spec>
auto make_input(const Spec& s) {
  return input_node<I, typename spec_shape_info<Spec>::type>{{}, Shape(s.shape), s.name};
}

template <class... Specs, std::size_t... I>
auto make_inputs(std::index_sequence<I...>, const Specs&... specs) {
  return std::tuple{make_input<I>(specs)...};
}

/// The traced module, or null for a plain callable.
template <class F>
const Module* module_of(const F& f) {
  if constexpr (std::derived_from<F, Module>)
    return &f;
  else
    return nullptr;
}

template <class S>
inline constexpr bool is_spec_v = std::same_as<S, dynamic_spec>;
template <std::int64_t... D>
inline constexpr bool is_spec_v<static_spec<D...>> = true;

}  // namespace detail

/// Traces `f` (a tmod::Module: its forward; or any generic callable) with one symbolic input per
/// spec. The result's type is the graph; the module must outlive it.
template <class F, class... Specs>
auto symbolic_trace(const F& f, const Specs&... specs) {
  static_assert((detail::is_spec_v<Specs> && ...),
                "tmod::symbolic_trace: pass one tmod::spec({...}) or tmod::spec<...>() per input of forward");
  detail::frame_scope scope(detail::finder_for(f));
  auto inputs = detail::make_inputs(std::index_sequence_for<Specs...>{}, specs...);
  auto output = std::apply(
      [&](const auto&... in) { return detail::normalize_output(detail::invoke_forward(f, in...)); }, inputs);
  return std::apply(
      [&](const auto&... in) {
        return typed_graph<decltype(output), std::remove_cvref_t<decltype(in)>...>{output, inputs, scope.id_count(),
                                                                                        detail::module_of(f)};
      },
      inputs);
}

}  // namespace tracemod::trace

namespace tracemod {
using trace::symbolic_trace;
}  // namespace tracemod
