// typed_graph: the result of tmod::symbolic_trace. Its type is the graph (the output node types
// and the input node types); calling it with tensors evaluates it (see evaluate.hpp).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/meta.hpp>
#include <tracemod/trace/evaluate.hpp>
#include <tracemod/trace/node.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace tracemod {
class Module;
}

namespace tracemod::trace {

namespace detail {
template <class T>
inline constexpr bool is_output_tuple_v = false;
template <class... T>
inline constexpr bool is_output_tuple_v<std::tuple<T...>> = true;
template <class A, class B>
inline constexpr bool is_output_tuple_v<std::pair<A, B>> = true;

/// Stands for the output of a graph with several outputs, whose shapes are not one static shape.
struct several_outputs {
  using shape_info = dynamic_dims;
};

/// A forward may return one symbolic tensor, or a std::tuple / std::pair of them.
template <class R>
auto normalize_output(R&& r) {
  using T = std::remove_cvref_t<R>;
  if constexpr (symbolic<T>) {
    return std::forward<R>(r);
  } else if constexpr (is_output_tuple_v<T>) {
    return std::apply(
        [](auto&&... e) {
          static_assert((symbolic<std::remove_cvref_t<decltype(e)>> && ...),
                        "tmod::symbolic_trace: a forward returning several values returns a flat std::tuple or "
                        "std::pair of symbolic tensors (no nesting, no non-tensor values)");
          return std::tuple{std::forward<decltype(e)>(e)...};
        },
        std::forward<R>(r));
  } else {
    static_assert(::tracemod::detail::always_false_v<T>,
                  "tmod::symbolic_trace: forward must return a tensor computed from its symbolic inputs, or a "
                  "std::tuple/std::pair of them (a tensor that does not depend on the inputs is not traceable)");
  }
}
}  // namespace detail

/// A traced graph. Out is a node type, or a std::tuple/std::pair of node types (several outputs);
/// Inputs are the input_node types, in order.
template <class Out, class... Inputs>
class typed_graph {
 public:
  using output_type = Out;
  using input_types = std::tuple<Inputs...>;
  static constexpr std::size_t input_count = sizeof...(Inputs);
  static constexpr bool multiple_outputs = detail::is_output_tuple_v<Out>;
  using output_shape_info =
      typename std::conditional_t<multiple_outputs, detail::several_outputs, Out>::shape_info;

  typed_graph(Out output, std::tuple<Inputs...> inputs, std::uint32_t call_count, const Module* module = nullptr)
      : output_(std::move(output)), inputs_(std::move(inputs)), call_count_(call_count), module_(module) {}

  [[nodiscard]] const Out& output() const noexcept { return output_; }
  [[nodiscard]] const std::tuple<Inputs...>& inputs() const noexcept { return inputs_; }
  /// Number of calls recorded (ids 0 .. call_count() - 1).
  [[nodiscard]] std::uint32_t call_count() const noexcept { return call_count_; }
  /// The module whose forward was traced (what lowering builds the module tree from); null when a
  /// plain callable was traced.
  [[nodiscard]] const Module* module() const noexcept { return module_; }

  /// Evaluates the graph: a Tensor, or a std::tuple of Tensors for several outputs.
  template <class... T>
  auto operator()(const T&... tensors) const {
    static_assert(sizeof...(T) == input_count,
                  "typed_graph: call the graph with exactly one tensor per symbolic input of the trace");
    static_assert((std::derived_from<T, Tensor> && ...), "typed_graph: the graph's arguments must be tmod::Tensor");
    const std::vector<Tensor> args{Tensor(tensors)...};
    std::vector<Tensor> out = run(args);
    if constexpr (multiple_outputs)
      return to_tuple(out, std::make_index_sequence<std::tuple_size_v<Out>>{});
    else
      return out[0];
  }

  /// Evaluates with inputs given as a list; returns the outputs flattened.
  std::vector<Tensor> run(std::span<const Tensor> args) const {
    if (args.size() != input_count)
      throw graph_error("typed_graph: expected " + std::to_string(input_count) + " inputs, got " +
                        std::to_string(args.size()));
    check_inputs(args, std::index_sequence_for<Inputs...>{});
    detail::eval_frame f{args, std::vector<std::vector<Tensor>>(call_count_)};
    if constexpr (multiple_outputs)
      return std::apply([&](const auto&... o) { return std::vector<Tensor>{detail::evaluate(o, f)...}; }, output_);
    else
      return {detail::evaluate(output_, f)};
  }

 private:
  template <std::size_t... I>
  void check_inputs(std::span<const Tensor> args, std::index_sequence<I...>) const {
    (check_input<I>(args[I]), ...);
  }
  template <std::size_t I>
  void check_input(const Tensor& t) const {
    using N = std::tuple_element_t<I, std::tuple<Inputs...>>;
    if (!t.defined()) throw value_error("typed_graph: input " + std::to_string(I) + " is an undefined tensor");
    if constexpr (has_static_shape_v<N>) {
      if (t.shape() != N::shape_info::value)
        throw shape_error("typed_graph: input " + std::to_string(I) + " has shape " + t.shape().to_string() +
                          " but its static spec is " + N::shape_info::value.to_string());
    }
  }
  template <std::size_t... I>
  static auto to_tuple(const std::vector<Tensor>& v, std::index_sequence<I...>) {
    return std::tuple{(static_cast<void>(I), v[I])...};
  }

  Out output_;
  std::tuple<Inputs...> inputs_;
  std::uint32_t call_count_;
  const Module* module_;
};

}  // namespace tracemod::trace
