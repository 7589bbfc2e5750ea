// Modules in a symbolic trace: how a traced forward is invoked, how attribute reads and sub-module
// calls find their names, and tracemod_call_module, which a module's call operator reaches (by
// argument-dependent lookup) when an argument is symbolic: a builtin module becomes one opaque call
// node; a user module's forward is traced into a sub-graph of its own, so the hierarchy is kept.
#pragma once

#include <tracemod/nn/module.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/trace/apply.hpp>
#include <tracemod/trace/context.hpp>
#include <tracemod/trace/typed_graph.hpp>
#include <tracemod/trace/node.hpp>

#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tracemod::trace {

namespace detail {

/// Attribute lookup relative to module m: tensors by their buffer, sub-modules by address.
inline attribute_finder module_finder(const Module& m) {
  return {[&m](const Tensor& t) -> std::optional<std::string> {
            for (const auto& [path, tensor] : m.named_tensors())
              if (tensor.shares_storage_with(t)) return path;
            return std::nullopt;
          },
          [&m](const void* address) -> std::optional<std::string> {
            for (const auto& [path, module] : m.named_modules())
              if (!path.empty() && static_cast<const void*>(&module) == address) return path;
            return std::nullopt;
          }};
}

template <class F>
attribute_finder finder_for(const F& f) {
  if constexpr (std::derived_from<F, Module>)
    return module_finder(f);
  else
    return {};
}

/// A module is traced through its forward (its call operator would record a call of itself); any
/// other callable is called.
template <class F, class... In>
decltype(auto) invoke_forward(const F& f, const In&... in) {
  if constexpr (std::derived_from<F, Module>)
    return f.forward(in...);
  else
    return f(in...);
}

template <class N>
using input_shape_info_t = typename operand_shape_info<N>::type;

template <class... Operands, std::size_t... I>
auto make_sub_inputs(const std::tuple<Operands...>& operands, std::index_sequence<I...>) {
  return std::tuple{input_node<I, input_shape_info_t<Operands>>{{}, runtime_shape(std::get<I>(operands)), {}}...};
}

template <class Call, std::size_t... I>
auto split_outputs(const Call& call, const std::vector<Shape>& shapes, std::index_sequence<I...>) {
  return std::tuple{output_node<I, Call>{{}, call, shapes[I]}...};
}

}  // namespace detail

/// Records a call of module m on arguments of which at least one is symbolic.
template <class M, class... A>
  requires std::derived_from<M, Module> && (symbolic<A> || ...)
auto tracemod_call_module(const M& m, const A&... args) {
  std::string name = detail::module_path(&m).value_or(std::string(m.type_name()));
  std::tuple operands{to_operand(args)...};
  if constexpr (nn::is_builtin_module_v<M>) {
    const Shape shape = std::apply([&](const auto&... o) { return m.infer_shape(detail::runtime_shape(o)...); }, operands);
    (void)Tensor::byte_size(shape, DType::float32, name);  // an output no allocation can hold fails now
    const std::uint32_t id = detail::next_call_id(name);
    return builtin_call_node<M, operand_t<A>...>{{}, &m, std::move(name), std::move(operands), shape, id};
  } else {
    auto sub = [&] {
      detail::frame_scope scope(detail::module_finder(m));
      auto inputs = detail::make_sub_inputs(operands, std::index_sequence_for<A...>{});
      auto output = std::apply(
          [&](const auto&... in) { return detail::normalize_output(m.forward(in...)); }, inputs);
      return std::apply(
          [&](const auto&... in) {
            return typed_graph<decltype(output), std::remove_cvref_t<decltype(in)>...>{output, inputs,
                                                                                       scope.id_count(), &m};
          },
          inputs);
    }();
    using G = decltype(sub);
    const std::uint32_t id = detail::next_call_id(name);
    if constexpr (G::multiple_outputs) {
      std::vector<Shape> shapes;
      std::apply([&](const auto&... o) { (shapes.push_back(o.shape), ...); }, sub.output());
      module_call_node<M, G, operand_t<A>...> call{{}, &m, std::move(name), std::move(sub), std::move(operands), {}, id};
      return detail::split_outputs(call, shapes, std::make_index_sequence<std::tuple_size_v<typename G::output_type>>{});
    } else {
      const Shape shape = sub.output().shape;
      return module_call_node<M, G, operand_t<A>...>{{}, &m, std::move(name), std::move(sub), std::move(operands),
                                                     shape, id};
    }
  }
}

}  // namespace tracemod::trace
