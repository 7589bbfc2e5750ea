// The node types of a typed graph. A typed graph is an expression tree (Boost.YAP style: a node is
// a kind plus its operands, held by value) whose type is the graph's structure:
//
//   input_node<I, S>              graph input I (MegEngine's Input); S = static_dims<...> or dynamic_dims
//   attr_node<T>                  a parameter/buffer read through the module (GetAttr)
//   constant_node                 a tensor that is no graph value (Constant)
//   op_node<Op, P, Args...>       a functional op or tensor method (CallFunction / CallMethod)
//   builtin_call_node<M, Args...> a call of an opaque builtin module (CallMethod on a module)
//   module_call_node<M, G, Args...>  a call of a user module, holding G, the typed graph of its forward
//   output_node<I, Call>          output I of a call that returns several values
//
// Operands that are not tensors stay what they are: scalar_leaf (a run-time number), a
// tmod::c<V> constant_scalar (a compile-time number), tmod::none.
//
// Values shared by several consumers appear once per use in the tree; every call node carries the
// run-time id of the call it records, so evaluation computes a shared call once and lowering
// recovers the DAG. Leaves need no id.
#pragma once

#include <tracemod/core/constant_scalar.hpp>
#include <tracemod/core/meta.hpp>
#include <tracemod/core/none.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/functional/op.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tracemod::trace {

/// MegEngine's expr kinds, which the runtime IR lowers each node into.
enum class node_kind : std::uint8_t { input, get_attr, constant, call_function, call_method, call_module, output };

namespace detail {

template <class T>
inline constexpr bool is_tuple_v = false;
template <class... T>
inline constexpr bool is_tuple_v<std::tuple<T...>> = true;
}  // namespace detail

/// Marker base: every symbolic tensor (typed-graph node) derives from it. A symbolic tensor has no
/// value while tracing, so converting it to bool (`if (x)`, `bool(x)`) is rejected at compile time.
/// Neither can a variable holding one be reassigned (`x = x + 1.f`): each operation has its own node
/// type. Every node struct re-exports this operator= so that such an assignment picks it (an exact
/// match) and stops with its message instead of a list of candidate assignment operators.
struct node_base {
  template <class T = void>
  explicit operator bool() const {
    static_assert(::tracemod::detail::always_false_v<T>,
                  "tmod::symbolic_trace: a symbolic tensor has no value while tracing, so it cannot decide a "
                  "branch (if/while/bool). Use tensor ops (F::maximum, F::relu, ...) or branch on a non-tensor "
                  "value; the run-time tracer handles data-dependent control flow");
    return false;
  }

  template <class T>
  void operator=(const T&) {
    static_assert(::tracemod::detail::always_false_v<T>,
                  "tmod::symbolic_trace: a variable holding a symbolic tensor cannot be reassigned, because "
                  "every traced operation has a type of its own. Name each result (auto y = x + 1.f) or use "
                  "the run-time tracer");
  }
};

template <class T>
concept symbolic = std::derived_from<std::remove_cvref_t<T>, node_base>;

/// Shape known at compile time.
template <std::int64_t... D>
struct static_dims {
  static constexpr bool is_static = true;
  static constexpr Shape value{D...};
};
/// Shape known only at trace time.
struct dynamic_dims {
  static constexpr bool is_static = false;
  static constexpr Shape value{};
};

/// Compile-time shape information of node type N: N::shape_info is static_dims<...> or dynamic_dims.
template <class N>
inline constexpr bool has_static_shape_v = N::shape_info::is_static;

/// A graph input. The shape given by the spec is what tracing infers shapes from.
template <std::size_t I, class S>
struct input_node : node_base {
  using node_base::operator=;
  static constexpr node_kind kind = node_kind::input;
  static constexpr std::size_t index = I;
  using shape_info = S;
  Shape shape;
  std::string name;
};

/// A tensor attribute of the module being traced (Parameter or Buffer), read at evaluation time.
template <class T>
struct attr_node : node_base {
  using node_base::operator=;
  static constexpr node_kind kind = node_kind::get_attr;
  using shape_info = dynamic_dims;
  using attribute_type = T;
  // The attribute's handle at trace time: it shares the module's buffer, so values loaded later
  // (load_state_dict copies into the existing buffers) are what evaluation reads.
  Tensor tensor;
  std::string name;  // path relative to the traced module ("param", "layer1.0.conv1.weight"); empty
                     // when the tensor is no attribute of it (then it lowers to a Constant)
  Shape shape;
  // The module's member itself when `name` is set: evaluation reads it, so a tensor rebound later by
  // setattr is followed, as builtin module calls follow their module. The module outlives the graph.
  const Tensor* source = nullptr;

  /// The tensor evaluation uses: the member's current value, or the handle for a non-attribute.
  [[nodiscard]] const Tensor& current() const noexcept { return source != nullptr ? *source : tensor; }
};

/// A tensor with no graph node of its own (created in forward, or a global), frozen into the graph.
struct constant_node : node_base {
  using node_base::operator=;
  static constexpr node_kind kind = node_kind::constant;
  using shape_info = dynamic_dims;
  Tensor value;
  Shape shape;
};

/// A number passed where an op takes a scalar; a const value of the call, not a node. Evaluation
/// reads `value`; lowering records the number as the C++ argument was written (`x * 2` prints `2`,
/// `x * 0.1` prints `0.1`), as the run-time tracer does.
struct scalar_leaf {
  enum class source : std::uint8_t { single, integer, real };  ///< float, an integer type, double

  float value = 0.0f;
  source type = source::single;
  double written = 0.0;  ///< the argument as written (an integer or a double keeps its precision)

  constexpr explicit scalar_leaf(float v) noexcept : value(v), written(v) {}

  /// The leaf of an arithmetic argument, remembering its type.
  template <class A>
  static constexpr scalar_leaf of(A a) noexcept {
    scalar_leaf s(static_cast<float>(a));
    s.written = static_cast<double>(a);
    s.type = std::is_integral_v<A> ? source::integer : std::same_as<A, float> ? source::single : source::real;
    return s;
  }
};

/// A call of functional op `Op` with params `P` (Op::params) on operands Args.
template <class Op, class P, class S, class... Args>
struct op_node : node_base {
  using node_base::operator=;
  static constexpr node_kind kind =
      Op::kind == functional::call_kind::method ? node_kind::call_method : node_kind::call_function;
  using op = Op;
  using shape_info = S;
  P params;
  std::tuple<Args...> args;
  Shape shape;
  std::uint32_t id;
};

/// A call of a builtin (opaque) module: evaluated by the module's own forward.
template <class M, class... Args>
struct builtin_call_node : node_base {
  using node_base::operator=;
  static constexpr node_kind kind = node_kind::call_module;
  using module_type = M;
  using shape_info = dynamic_dims;
  const M* module;
  std::string name;
  std::tuple<Args...> args;
  Shape shape;
  std::uint32_t id;
};

/// A call of a user module: G is the typed graph of its forward, traced with its own inputs.
template <class M, class G, class... Args>
struct module_call_node : node_base {
  using node_base::operator=;
  static constexpr node_kind kind = node_kind::call_module;
  using module_type = M;
  using graph_type = G;
  using shape_info = typename G::output_shape_info;
  const M* module;
  std::string name;
  G graph;
  std::tuple<Args...> args;
  Shape shape;
  std::uint32_t id;
};

/// Output I of a user-module call whose forward returns a tuple.
template <std::size_t I, class Call>
struct output_node : node_base {
  using node_base::operator=;
  static constexpr node_kind kind = node_kind::output;
  static constexpr std::size_t index = I;
  using call_type = Call;
  using shape_info = dynamic_dims;
  Call call;
  Shape shape;
};

}  // namespace tracemod::trace
