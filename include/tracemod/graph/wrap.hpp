// tmod::wrap (MegEngine's tm.wrap / torch.fx.wrap): makes a user function a builtin op. Called on
// tensors it runs the function; called with a tmod::Sym (trace_module, insert_exprs) it records one
// CallFunction printed with its name instead of the ops inside it. The op joins the registry, so
// the interpreter (and everything else that reaches ops by target) knows it.
//
//   inline const auto my_relu6 = tmod::wrap("my_relu6", [](const auto& x) { return F::minimum(F::relu(x), 6.f); });
//
// The function takes N tensors (wrap<N>, default 1) and returns one. Its output shape is found
// without computing anything when it also accepts Syms (a generic lambda: its ops are recorded
// into a scratch graph), otherwise by running it on zeros of the operands' shapes.
//
// In the compile-time tracer (tmod::symbolic_trace) a call on symbolic tensors becomes one op node
// of type tmod::wrapped_op_t<decltype(my_relu6)>, which queries name like any op's type and which
// evaluation runs as the function itself (one call, not its ops); lowering to a TracedModule
// records the same CallFunction as a Sym call. The node is reached the way every functional op
// reaches the tracer: tracemod_apply found by argument-dependent lookup, so this header does not
// include the compile-time layer.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/factories.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/graph/recorder.hpp>
#include <tracemod/graph/sym.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod {

namespace detail {

template <std::size_t I>
using tensor_at = Tensor;
template <std::size_t I>
using sym_at = graph::Sym;

/// The output shape of `fn` for operands of `shapes`: recorded on Syms into a scratch graph when
/// `fn` accepts them, else computed on zeros.
template <class Fn, std::size_t... I>
Shape wrapped_infer_shape(const Fn& fn, const std::string& name, std::span<const functional::erased_shape> shapes,
                          std::index_sequence<I...>) {
  for (const auto& s : shapes)
    if (s.k != functional::erased_operand::kind::tensor)
      throw value_error(name + ": every operand of a wrapped function must be a tensor");
  if constexpr (std::is_invocable_v<const Fn&, const sym_at<I>&...>) {
    graph::Graph scratch(name, name, nullptr);
    graph::ModuleNode* self = scratch.add_self_input("Module");
    std::array<graph::Sym, sizeof...(I)> in{graph::Sym(scratch.add_tensor_input("x", shapes[I].shape, DType::float32))...};
    graph::Recorder r(scratch, self, nullptr, nullptr, nullptr);
    const graph::Sym out = fn(in[I]...);
    return out.shape();
  } else {
    return Tensor(fn(zeros(shapes[I].shape)...)).shape();
  }
}

template <class Fn, std::size_t... I>
functional::op_entry wrapped_entry(std::string name, std::shared_ptr<const Fn> fn, std::index_sequence<I...> seq) {
  functional::op_entry e;
  e.name = name;
  e.target = name;
  e.kind = functional::call_kind::function;
  static constexpr std::array<std::string_view, 4> names{"x", "y", "z", "w"};
  static_assert(sizeof...(I) <= names.size(), "tmod::wrap: a wrapped function takes 1 to 4 tensors");
  e.operands = {functional::operand{names[I], functional::operand_kind::tensor}...};
  e.make_params = [name](std::span<const Value> values) -> functional::erased_params {
    if (!values.empty()) throw value_error(name + ": a wrapped function takes no parameters");
    return std::make_shared<int>(0);  // non-null: built once per expr
  };
  e.call = [fn, name](const void*, std::span<const functional::erased_operand> ops) -> Tensor {
    if (ops.size() != sizeof...(I))
      throw value_error(name + ": expected " + std::to_string(sizeof...(I)) + " operands, got " + std::to_string(ops.size()));
    for (const auto& o : ops)
      if (o.k != functional::erased_operand::kind::tensor) throw value_error(name + ": every operand must be a tensor");
    return Tensor((*fn)(*ops[I].tensor...));
  };
  e.infer_shape = [fn, name](const void*, std::span<const functional::erased_shape> shapes) -> Shape {
    if (shapes.size() != sizeof...(I))
      throw value_error(name + ": expected " + std::to_string(sizeof...(I)) + " operands, got " + std::to_string(shapes.size()));
    return wrapped_infer_shape(*fn, name, shapes, std::index_sequence<I...>{});
  };
  // A wrapped function's arithmetic is unknown: its cost is the bytes it reads and writes.
  e.cost = [](const void*, std::span<const functional::erased_shape> shapes, const Shape& out) {
    return functional::detail::io_bytes(shapes, out);
  };
  e.infer_dtype = [](const void*, std::span<const DType>) { return DType::float32; };
  (void)seq;
  return e;
}

/// The op type of a wrapped function in typed graphs. Its name, shape inference and registry entry
/// are the wrapped function's, carried in its params (they are known at run time only).
template <class Fn, std::size_t N>
struct wrapped_op {
  struct params {
    const functional::op_entry* entry = nullptr;
    std::shared_ptr<const Fn> fn;
  };
  static constexpr std::string_view name = "wrapped";  // for diagnostics only: prints use entry()
  static constexpr std::string_view target = "wrapped";
  static constexpr functional::call_kind kind = functional::call_kind::function;
  static constexpr std::array<functional::operand, N> operands = [] {
    std::array<functional::operand, N> a{};
    for (functional::operand& o : a) o = {"x", functional::operand_kind::tensor};
    return a;
  }();
  static constexpr std::tuple<> fields{};

  static const functional::op_entry& entry(const params& p) { return *p.entry; }

  template <class... S>
    requires(sizeof...(S) == N && (std::same_as<S, Shape> && ...))
  static Shape infer_shape(const params& p, const S&... shapes) {
    const std::array<functional::erased_shape, N> erased{functional::erased_shape{functional::erased_operand::kind::tensor, shapes, {}}...};
    return p.entry->infer_shape(nullptr, erased);
  }

  template <class... T>
    requires(sizeof...(T) == N)
  static Tensor eager(const params& p, const T&... tensors) {
    return Tensor((*p.fn)(Tensor(tensors)...));
  }
};

}  // namespace detail

/// A user function made a builtin op (see wrap).
template <std::size_t N, class Fn>
class wrapped_function {
 public:
  /// The op type of its calls in typed graphs (tmod::wrapped_op_t).
  using op_type = detail::wrapped_op<Fn, N>;

  wrapped_function(const functional::op_entry& entry, std::shared_ptr<const Fn> fn) : entry_(&entry), fn_(std::move(fn)) {}

  [[nodiscard]] const functional::op_entry& entry() const noexcept { return *entry_; }
  [[nodiscard]] const std::string& name() const noexcept { return entry_->name; }

  /// Eager: runs the function.
  template <class... A>
    requires(sizeof...(A) == N && (std::derived_from<A, Tensor> && ...))
  Tensor operator()(const A&... a) const {
    return Tensor((*fn_)(a...));
  }
  /// Recording: one CallFunction.
  template <class... A>
    requires(sizeof...(A) == N && (graph::detail::is_sym_v<A> || ...) &&
             ((graph::detail::is_sym_v<A> || std::derived_from<A, Tensor>) && ...))
  graph::Sym operator()(const A&... a) const {
    graph::Recorder& r = graph::Recorder::current(entry_->name);
    const std::vector<graph::CallArg> operands{graph::detail::to_arg(r, a)...};
    return graph::Sym(r.graph().create_op_call(*entry_, operands, {})->output());
  }
  /// Compile-time tracing: one op node of type wrapped_op_t<wrapped_function>.
  template <class... A>
    requires(sizeof...(A) == N && !(std::derived_from<A, Tensor> && ...) && !(graph::detail::is_sym_v<A> || ...) &&
             requires(const typename op_type::params& p, const A&... a) { tracemod_apply(op_type{}, p, a...); })
  auto operator()(const A&... a) const {
    return tracemod_apply(op_type{}, typename op_type::params{entry_, fn_}, a...);
  }

 private:
  const functional::op_entry* entry_;
  std::shared_ptr<const Fn> fn_;
};

/// Registers `fn` (N tensors -> one tensor) as the builtin op `name`; throws value_error if an op
/// of that name exists. Wrap once, at namespace scope, as MegEngine's decorator does.
template <std::size_t N = 1, class Fn>
wrapped_function<N, Fn> wrap(std::string name, Fn fn) {
  static_assert(N >= 1, "tmod::wrap: a wrapped function takes at least one tensor");
  static_assert(std::is_invocable_v<const Fn&, const detail::tensor_at<0>&> || N != 1,
                "tmod::wrap: the function must accept tmod::Tensor operands (wrap<N> for N of them)");
  if (name.empty()) throw value_error("tmod::wrap: the name is empty");
  auto shared = std::make_shared<const Fn>(std::move(fn));
  const functional::op_entry& entry =
      functional::op_registry::instance().add(detail::wrapped_entry(std::move(name), shared, std::make_index_sequence<N>{}));
  return wrapped_function<N, Fn>(entry, std::move(shared));
}

/// The op type that calls of wrapped function W (decltype(my_relu6)) have in typed graphs, e.g. for
/// tmod::has_op<tmod::wrapped_op_t<decltype(my_relu6)>>(graph).
template <class W>
using wrapped_op_t = typename std::remove_cvref_t<W>::op_type;

}  // namespace tracemod
