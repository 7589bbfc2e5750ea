// tmod::Sym: the third mode of every op and module call. A Sym is a handle to a node of the graph
// being recorded (by trace_module, or inside Graph::insert_exprs); passing one to a functional op,
// a tensor operator or a module call records an expr and returns a Sym for its result, through the
// same argument-dependent-lookup hooks the compile-time tracer uses, so no op is written twice.
//
// Sym lives in tracemod::graph so that those hooks are not even considered for plain tensors.
// A Sym has no value: converting it to bool or comparing it throws graph_error naming the node
// (data-dependent control flow cannot be recorded; MegEngine records the branch taken silently).
#pragma once

#include <tracemod/core/constant_scalar.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/core/meta.hpp>
#include <tracemod/core/none.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/graph/recorder.hpp>
#include <tracemod/nn/module.hpp>
#include <tracemod/nn/reflection.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod::graph {

class Sym {
 public:
  Sym() = default;
  explicit Sym(Node* n) : node_(n) {}

  [[nodiscard]] Node* node() const noexcept { return node_; }
  [[nodiscard]] bool is_tensor() const noexcept { return node_ != nullptr && node_->is_tensor(); }
  /// The recorded shape of a tensor node.
  [[nodiscard]] const Shape& shape() const { return tensor_node().shape(); }
  [[nodiscard]] DType dtype() const { return tensor_node().dtype(); }
  [[nodiscard]] std::size_t ndim() const { return shape().rank(); }
  /// The example extent of a static axis; a symbolic axis has none to give (F::size records it).
  [[nodiscard]] std::int64_t size(std::int64_t axis) const {
    const std::size_t a = normalize_axis(axis, ndim(), "Sym.size");
    const TensorNode& t = tensor_node();
    if (t.is_dynamic() && !t.dims()[a].is_constant())
      throw shape_error("Sym.size(" + std::to_string(axis) + "): axis " + std::to_string(a) + " of " + describe() +
                        " is symbolic, " + t.shape_text() + ", so its extent is not known while recording; "
                        "F::size(x, " + std::to_string(axis) + ") records it as a value");
    return shape()[a];
  }
  [[nodiscard]] const TensorNode& tensor_node() const {
    if (!is_tensor()) throw graph_error("tmod::Sym: " + describe() + " is not a tensor");
    return static_cast<const TensorNode&>(*node_);
  }

  /// A Sym has no value while recording: deciding a branch on it cannot be recorded.
  explicit operator bool() const {
    throw graph_error("bool(tmod::Sym): " + describe() +
                      " has no value while the graph is recorded, so it cannot decide a branch; use tensor ops "
                      "(F::maximum, F::relu, ...) or branch on non-tensor arguments");
  }

  [[nodiscard]] std::string describe() const {
    if (node_ == nullptr) return "an empty Sym";
    std::string s = "node '" + node_->name() + "'";
    if (const Expr* e = node_->expr(); e != nullptr && e->kind() != ExprKind::input)
      s += " (produced by " + (e->is_call() ? e->target() : std::string(e->kind() == ExprKind::get_attr ? "getattr" : "Constant")) + ")";
    return s;
  }

 private:
  Node* node_ = nullptr;
};

}  // namespace tracemod::graph

template <>
inline constexpr bool tracemod::functional::uses_tensor_operators<tracemod::graph::Sym> = true;

namespace tracemod::graph {

namespace detail {

template <class T>
inline constexpr bool is_sym_v = std::same_as<std::remove_cvref_t<T>, Sym>;

template <class T>
inline constexpr bool is_sym_tuple_v = false;
template <class... T>
inline constexpr bool is_sym_tuple_v<std::tuple<T...>> =
    ((is_sym_v<T> || std::derived_from<T, Tensor>) && ...) && (is_sym_v<T> || ...);

/// Arguments that make a call record: a Sym, or a list of them.
template <class T>
concept involves_sym = is_sym_v<T> || std::same_as<std::remove_cvref_t<T>, std::vector<Sym>> ||
                       is_sym_tuple_v<std::remove_cvref_t<T>>;

/// The constant Value of a non-tensor argument, keeping its C++ type (an int prints as 2, a
/// double as 2.5).
template <class A>
Value constant_value(const A& a) {
  if constexpr (is_constant_scalar_v<A>)
    return Value(static_cast<float>(a));
  else if constexpr (std::same_as<A, none_t>)
    return Value(none);
  else if constexpr (std::is_arithmetic_v<A> || std::is_convertible_v<A, std::string_view>)
    return Value(a);
  else if constexpr (std::same_as<A, Value>)
    return a;
  else
    static_assert(::tracemod::detail::always_false_v<A>,
                  "tmod::Sym: a non-tensor argument of a recorded call must be a number, bool, string, "
                  "tmod::none or tmod::Value");
}

/// The argument of a recorded call for a C++ argument.
template <class A>
CallArg to_arg(Recorder& r, const A& a) {
  if constexpr (is_sym_v<A>) {
    if (a.node() == nullptr) throw graph_error(r.graph().name() + ".Graph: an empty tmod::Sym was passed to a call");
    return a.node();
  } else if constexpr (std::derived_from<A, Tensor>) {
    return r.tensor_node(a);
  } else if constexpr (std::same_as<A, std::vector<Sym>> || std::same_as<A, std::vector<Tensor>>) {
    std::vector<Node*> v;
    for (const auto& x : a) v.push_back(std::get<Node*>(to_arg(r, x)));
    return v;
  } else if constexpr (is_sym_tuple_v<A> || functional::is_tensor_tuple_v<A>) {
    return std::apply([&](const auto&... x) { return std::vector<Node*>{std::get<Node*>(to_arg(r, x))...}; }, a);
  } else {
    return constant_value(a);
  }
}

/// "Tensor" for tensor arguments, the repr of others (strings quoted): the part of a call signature.
template <class A>
std::string signature_part(const A& a) {
  if constexpr (is_sym_v<A> || std::derived_from<A, Tensor>) {
    return "Tensor";
  } else {
    const Value v = constant_value(a);
    return v.kind() == Value::Kind::string ? "'" + v.string() + "'" : v.repr();
  }
}

template <class... A>
std::string signature_of(const A&... a) {
  std::string s;
  ((s += (s.empty() ? "" : ", ") + signature_part(a)), ...);
  return "(" + s + ")";
}

/// Records a call of op `Op` with `params` on recorded operands; returns its output node.
template <class Op, class P>
Node* record_op_call(Recorder& r, const P& params, const std::vector<CallArg>& operands) {
  std::vector<Value> values;
  functional::for_each_param<Op>(params, [&](std::string_view, const auto& v, bool) { values.push_back(functional::to_value(v)); });
  return r.graph().create_op_call(functional::entry_of_call<Op>(params), operands, values)->output();
}

/// Whether R can be a graph's output: a Sym or Tensor, or std::tuple / std::pair / std::vector of
/// those (nested). Checked before output_tree is instantiated, so a wrong result type stops at the
/// static_assert that names the rule.
template <class R>
struct is_recordable_output : std::bool_constant<is_sym_v<R> || std::derived_from<R, Tensor>> {};
template <class... T>
struct is_recordable_output<std::tuple<T...>> : std::bool_constant<(is_recordable_output<T>::value && ...)> {};
template <class A, class B>
struct is_recordable_output<std::pair<A, B>>
    : std::bool_constant<is_recordable_output<A>::value && is_recordable_output<B>::value> {};
template <class T>
struct is_recordable_output<std::vector<T>> : is_recordable_output<T> {};

template <class R>
concept recordable_output = is_recordable_output<R>::value;

/// Forward's return value <-> the nodes of a graph's outputs: Sym, std::tuple / std::pair /
/// std::vector of those (nested), or a Tensor (frozen into the graph as a Constant).
template <class R>
struct output_tree;

template <>
struct output_tree<Sym> {
  static NodeTree flatten(Recorder&, const Sym& s) { return NodeTree::leaf(s.node()); }
  static Sym unflatten(const std::vector<Node*>& nodes, std::size_t& next) { return Sym(nodes.at(next++)); }
};
template <class T>
  requires std::derived_from<T, Tensor>
struct output_tree<T> {
  static NodeTree flatten(Recorder& r, const T& t) { return NodeTree::leaf(r.tensor_node(t)); }
};
template <class... T>
struct output_tree<std::tuple<T...>> {
  static NodeTree flatten(Recorder& r, const std::tuple<T...>& t) {
    return NodeTree::tuple(std::apply([&](const auto&... x) {
      return std::vector<NodeTree>{output_tree<std::remove_cvref_t<decltype(x)>>::flatten(r, x)...};
    }, t));
  }
  static std::tuple<T...> unflatten(const std::vector<Node*>& nodes, std::size_t& next) {
    return std::tuple<T...>{output_tree<T>::unflatten(nodes, next)...};  // braces: left to right
  }
};
template <class A, class B>
struct output_tree<std::pair<A, B>> {
  static NodeTree flatten(Recorder& r, const std::pair<A, B>& p) {
    return NodeTree::tuple({output_tree<A>::flatten(r, p.first), output_tree<B>::flatten(r, p.second)});
  }
  static std::pair<A, B> unflatten(const std::vector<Node*>& nodes, std::size_t& next) {
    A a = output_tree<A>::unflatten(nodes, next);
    B b = output_tree<B>::unflatten(nodes, next);
    return {std::move(a), std::move(b)};
  }
};
template <class T>
struct output_tree<std::vector<T>> {
  static NodeTree flatten(Recorder& r, const std::vector<T>& v) {
    std::vector<NodeTree> c;
    for (const T& x : v) c.push_back(output_tree<T>::flatten(r, x));
    return NodeTree::list(std::move(c));
  }
};

/// A tensor argument of a user-module call becomes an input of the callee's graph.
template <class A>
using callee_arg_t = std::conditional_t<is_sym_v<A> || std::derived_from<A, Tensor>, Sym, A>;

}  // namespace detail

/// Records a functional op called with at least one Sym (reached from op_base::apply by ADL).
template <class Op, class P, class... A>
  requires(detail::involves_sym<A> || ...)
Sym tracemod_apply(Op, const P& params, const A&... args) {
  Recorder& r = Recorder::current(Op::target);
  // Built element by element: g++ 12 misreads the destruction of an initializer_list of variants
  // as a read of uninitialized memory (-Wmaybe-uninitialized).
  std::vector<CallArg> operands;
  operands.reserve(sizeof...(A));
  (operands.push_back(detail::to_arg(r, args)), ...);
  return Sym(detail::record_op_call<Op>(r, params, operands));
}

namespace detail {

/// Records into `g` the call of builtin module `m` (whose node is `callee`) on arguments that must
/// be tensor nodes; the output shape and symbolic dims are the module's own inference.
inline Node* record_builtin_call_args(Graph& g, const Module& m, ModuleNode* callee,
                                      const std::vector<CallArg>& call_args, std::string signature) {
  std::vector<Shape> shapes;
  std::vector<ShapeDims> dims;
  bool dynamic = false;
  for (const CallArg& a : call_args) {
    const auto* n = std::get_if<Node*>(&a);
    if (n == nullptr || !(*n)->is_tensor())
      throw graph_error(std::string(m.type_name()) + ": a builtin module call takes tensors only");
    const auto* t = static_cast<const TensorNode*>(*n);
    shapes.push_back(t->shape());
    dims.push_back({t->dims(), t->shape()});
    dynamic = dynamic || t->is_dynamic();
  }
  const Shape out = m.infer_shape_erased(shapes);
  std::optional<Dims> out_dims;
  if (dynamic) {
    out_dims = m.infer_dims_erased(dims);
    if (!out_dims || out_dims->size() != out.rank())
      throw shape_error(std::string(m.type_name()) + " '" + callee->name() +
                        "' has no symbolic shape inference (infer_dims), so it cannot take an input with dynamic "
                        "dimensions such as " + to_string(dims.front().dims));
  }
  Node* y = g.create_module_call(callee, call_args, std::move(signature), {{out, DType::float32}})->output();
  if (out_dims) static_cast<TensorNode*>(y)->set_dims(*out_dims);
  return y;
}

template <class M, class... A>
Sym record_builtin_call(Recorder& r, const M& m, const A&... args) {
  ModuleNode* callee = r.module_node(m);
  const std::vector<CallArg> call_args{to_arg(r, args)...};
  return Sym(record_builtin_call_args(r.graph(), m, callee, call_args, signature_of(args...)));
}

/// A new, empty graph for user module `m` (whose node in the recording graph is `callee`) called
/// with `signature`: named after the callee node in the caller's namespace, with its `self` input.
inline Graph& add_callee_graph(Recorder& r, ModuleTracer& tracer, const Module& m, const ModuleNode& callee,
                               const std::string& signature) {
  Graph& parent = r.graph();
  const std::string qualname = callee.qualname();
  Graph& g = tracer.add_graph(m, signature, "", qualname);
  g.rename_graph(parent.names().create_unique_name(qualname, &g), qualname);
  g.set_parent(&parent);
  g.add_self_input("Module");
  return g;
}

/// The (shape, dtype) of each output of a callee graph: the outputs of the call that uses it.
inline std::vector<std::pair<Shape, DType>> callee_outputs(const Graph& sub) {
  std::vector<std::pair<Shape, DType>> outs;
  for (const Node* n : sub.outputs()) {
    if (!n->is_tensor()) throw graph_error(sub.name() + ".Graph: a module cannot be an output");
    const auto* t = static_cast<const TensorNode*>(n);
    outs.emplace_back(t->shape(), t->dtype());
  }
  return outs;
}

template <class R, class M, class... A>
R record_traced_call(Recorder& r, const M& m, const A&... args);

/// The graph node of a Sym argument; nullptr for any other argument.
template <class A>
const Node* sym_node_of(const A& a) {
  if constexpr (is_sym_v<A>)
    return a.node();
  else
    return nullptr;
}

/// Records a call of user module `m`: its forward is traced into a graph once per signature.
template <class M, class... A>
auto record_user_call(Recorder& r, const M& m, const A&... args) {
  using R = std::remove_cvref_t<decltype(m.forward(std::declval<const callee_arg_t<A>&>()...))>;
  static_assert(recordable_output<R>,
                "tmod::trace_module: a forward must return a tensor, or a std::tuple / std::pair / std::vector of "
                "tensors (nested as needed)");
  if constexpr (recordable_output<R>) return record_traced_call<R>(r, m, args...);
}

template <class R, class M, class... A>
R record_traced_call(Recorder& r, const M& m, const A&... args) {
  ModuleTracer* tracer = r.tracer();
  if (tracer == nullptr)
    throw graph_error(std::string(m.type_name()) +
                      ": a user module can only be called while trace_module records (attach it with setattr and "
                      "call it through its node)");
  ModuleNode* callee = r.module_node(m);
  // One node passed twice stays one value inside the callee (self-attention's query, key and
  // value): its later parameters read the first one's input, and the signature says so.
  const std::array<const Node*, sizeof...(A)> nodes{sym_node_of(args)...};
  std::array<std::size_t, sizeof...(A)> first{};
  std::string signature = signature_of(args...), aliases;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    first[i] = i;
    for (std::size_t j = 0; j < i && first[i] == i; ++j)
      if (nodes[i] != nullptr && nodes[i] == nodes[j]) first[i] = j;
    if (first[i] != i) aliases += (aliases.empty() ? " with " : ", ") + std::to_string(i) + " is " + std::to_string(first[i]);
  }
  signature += aliases;
  Graph* sub = tracer->find_graph(m, signature);
  if (sub == nullptr) {
    Graph& g = add_callee_graph(r, *tracer, m, *callee, signature);
    Recorder sub_recorder(g, static_cast<ModuleNode*>(g.inputs().front()), &m, tracer, &tracer->index_of(m));
    std::array<TensorNode*, sizeof...(A)> made{};
    std::size_t k = 0;
    const auto input = [&](const auto& a) -> decltype(auto) {
      using T = std::remove_cvref_t<decltype(a)>;
      const std::size_t i = k++;
      (void)i;  // read by Sym arguments only
      if constexpr (is_sym_v<T>) {
        TensorNode* in = g.add_tensor_input("x", a.shape(), a.dtype());
        in->copy_symbolic(a.tensor_node());
        made[i] = in;
        return Sym(first[i] == i ? in : made[first[i]]);
      } else if constexpr (std::derived_from<T, Tensor>) {
        return Sym(g.add_tensor_input("x", a.shape(), a.dtype()));
      } else {
        return a;
      }
    };
    // Inputs are created left to right (a braced list fixes the order).
    std::tuple<callee_arg_t<A>...> in{input(args)...};
    const R out = std::apply([&](const auto&... x) { return m.forward(x...); }, in);
    g.set_outputs(output_tree<R>::flatten(sub_recorder, out));
    sub = &g;
  }
  const std::vector<CallArg> call_args{to_arg(r, args)...};
  Expr* e = r.graph().create_module_call(callee, call_args, signature, callee_outputs(*sub));
  const std::vector<Node*> sub_outputs = sub->outputs();
  for (std::size_t i = 0; i < e->output_count(); ++i) {
    const auto* from = static_cast<const TensorNode*>(sub_outputs[i]);
    static_cast<TensorNode*>(e->output(i))->copy_symbolic(*from);
  }
  std::size_t next = 0;
  return output_tree<R>::unflatten(e->outputs(), next);
}

}  // namespace detail

/// Records a module call with at least one Sym argument (reached from a module's call operator by
/// ADL): a builtin module is one opaque call; a user module's forward is traced into its own graph,
/// once per distinct call signature (argument kinds and non-tensor values).
template <class M, class... A>
  requires std::derived_from<M, Module> && (detail::involves_sym<A> || ...)
auto tracemod_call_module(const M& m, const A&... args) {
  Recorder& r = Recorder::current(std::string(m.type_name()));
  if constexpr (nn::is_builtin_module_v<M>) {
    return detail::record_builtin_call(r, m, args...);
  } else {
    // A user module made builtin with tmod::register_as_builtin (one tensor out) stays opaque too.
    using R = std::remove_cvref_t<decltype(m.forward(std::declval<const detail::callee_arg_t<A>&>()...))>;
    if constexpr (std::same_as<R, Sym>)
      if (m.is_builtin()) return detail::record_builtin_call(r, m, args...);
    return detail::record_user_call(r, m, args...);
  }
}

// ---- operators --------------------------------------------------------------------------------

// Sym takes the library's tensor operators (functional/tensor_methods.hpp; ADL finds them here);
// its compound assignments rebind the variable to the recorded result.
using tracemod::operator+;
using tracemod::operator-;
using tracemod::operator*;
using tracemod::operator/;

#define TRACEMOD_SYM_COMPOUND_ASSIGNMENT(op, imethod)           \
  template <class B>                                            \
    requires functional::tensor_operator_operands<Sym, B>       \
  Sym& operator op##=(Sym& a, const B& b) {                     \
    a = functional::imethod(a, b);                              \
    return a;                                                   \
  }

TRACEMOD_SYM_COMPOUND_ASSIGNMENT(+, method_iadd)
TRACEMOD_SYM_COMPOUND_ASSIGNMENT(-, method_isub)
TRACEMOD_SYM_COMPOUND_ASSIGNMENT(*, method_imul)
TRACEMOD_SYM_COMPOUND_ASSIGNMENT(/, method_itruediv)

#undef TRACEMOD_SYM_COMPOUND_ASSIGNMENT

namespace detail {
[[noreturn]] inline void comparison_error(const Sym& s, const char* op) {
  throw graph_error("tmod::Sym: comparing " + s.describe() + " (operator" + op +
                    ") has no value while the graph is recorded; use F::greater / F::equal / ... (bool tensors) "
                    "with F::where, F::maximum / F::minimum, or branch on non-tensor arguments");
}
template <class A, class B>
const Sym& sym_of(const A& a, const B& b) {
  if constexpr (is_sym_v<A>)
    return a;
  else
    return b;
}
}  // namespace detail

// Comparisons would decide control flow on values that do not exist while recording.
#define TRACEMOD_SYM_COMPARISON(op)                                  \
  template <class A, class B>                                        \
    requires(detail::is_sym_v<A> || detail::is_sym_v<B>)            \
  bool operator op(const A& a, const B& b) {                         \
    detail::comparison_error(detail::sym_of(a, b), #op);             \
  }

TRACEMOD_SYM_COMPARISON(<)
TRACEMOD_SYM_COMPARISON(>)
TRACEMOD_SYM_COMPARISON(<=)
TRACEMOD_SYM_COMPARISON(>=)
TRACEMOD_SYM_COMPARISON(==)
TRACEMOD_SYM_COMPARISON(!=)

#undef TRACEMOD_SYM_COMPARISON

}  // namespace tracemod::graph

namespace tracemod {
using graph::Sym;
}  // namespace tracemod
