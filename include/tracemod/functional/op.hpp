// The definition of a functional op, and the dispatch that picks its mode from the argument types.
//
// Every op is a stateless function object type (relu_fn, conv2d_fn, ...) whose static members are
// the op's single definition:
//   name      base for auto-naming outputs ("relu" -> relu_out), MegEngine's func.__name__
//   target    what a graph prints for the call: "nn.relu", "tensor.flatten", or a tensor method "__add__"
//   kind      call_kind::function (CallFunction) or call_kind::method (CallMethod on the first operand)
//   operands  tensor-valued arguments, in order (name and kind)
//   params    aggregate of the non-tensor arguments with their defaults (designated-initialiser friendly)
//   fields    the params members in canonical order: positional first, then keyword-only
//   infer_shape(params, shapes...) -> Shape   (constexpr where the op allows; throws shape_error)
//   eager(params, args...) -> Tensor          (runs the kernels now)
//   infer_dims(params, operands...) -> Dims   the symbolic output shape (core/dim.hpp) of a call on
//                  operands with dynamic dims, each a `const ShapeDims&` (a pointer for an optional
//                  tensor, a span for a list); elementwise ops need none: they broadcast their operands
//   infer_value(params, operands...) -> std::optional<ShapeValue>   for the ops that compute shapes
//                  as values (shape_of, getitem, stack): the output's value from the operands' (in
//                  infer_dims' forms; ShapeDims::value is null where an operand's value is unknown)
// and, where they apply, the op's facts:
//   kernel_op      the elementwise functor of fbatch values the kernel runs (elementwise.hpp): fused
//                  programs call it (fused_program.hpp), typed graphs fuse it (trace/evaluate.hpp)
//   arith, reflected, scaling, idempotent, in_place, foldable   algebraic facts the rewrites read
//   check_static_shapes<S...>()   compile-time check of static operand shapes while tracing
// An op header registers each op beside its definition: TRACEMOD_REGISTER_OP(relu_fn).
// Ops get their call operators from call_forms (functional/call.hpp, a base of op_base): operands,
// then positional params or the params struct. They forward to op_base::apply, which runs `eager`
// when every argument is a concrete value (Tensor, scalar, tmod::none, list of Tensors) and
// otherwise hands the call to an overload of
// `tracemod_apply(op, params, args...)` found by argument-dependent lookup: the tracing layers above
// provide those for their symbolic types, so this layer never includes them.
#pragma once

#include <tracemod/core/constant_scalar.hpp>
#include <tracemod/core/dim.hpp>
#include <tracemod/core/dtype.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/core/extern_template.hpp>
#include <tracemod/core/meta.hpp>
#include <tracemod/core/none.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/functional/cost.hpp>
#include <tracemod/functional/params.hpp>

#include <array>
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

namespace tracemod::functional {

enum class call_kind : std::uint8_t { function, method };

enum class operand_kind : std::uint8_t {
  tensor,            // a tensor (the receiver, for methods, is operand 0)
  optional_tensor,   // a tensor or tmod::none
  tensor_or_scalar,  // a tensor or a C++ number (kept as a const value)
  tensor_list,       // a sequence of tensors (concat)
  shape_value,       // an int32 tensor whose value is known when the call is recorded (a ShapeValue,
                     // core/dim.hpp): infer_shape and infer_dims take it as `const ShapeValue&`
};

struct operand {
  std::string_view name;
  operand_kind kind;
};

/// The operands of the weighted layers' ops (conv2d, linear): input, weight and an optional bias.
inline constexpr std::array weighted_operands{operand{"inp", operand_kind::tensor}, operand{"weight", operand_kind::tensor},
                                              operand{"bias", operand_kind::optional_tensor}};

/// A named member of an op's params struct, positional or keyword-only; a required one (PyTorch's
/// arguments without a default: kernel_size, target_shape) must be passed positionally.
template <class P, class T>
struct field {
  std::string_view name;
  T P::*member;
  bool keyword_only;
  bool required;
};
template <class P, class T>
constexpr field<P, T> positional(std::string_view name, T P::*member) {
  return {name, member, false, false};
}
template <class P, class T>
constexpr field<P, T> required(std::string_view name, T P::*member) {
  return {name, member, false, true};
}
template <class P, class T>
constexpr field<P, T> keyword(std::string_view name, T P::*member) {
  return {name, member, true, false};
}

/// How an op commutes with scaling its tensor operands by a number k (the fact BackwardFoldScale
/// uses): `linear` ops satisfy f(k*x, k*y) = k*f(x, y) for every k (add, reshape, average pooling),
/// `positive` ones only for k > 0 (relu, max pooling); scalar and constant operands scale with them.
/// An op declares `static constexpr scale_rule scaling = ...;`; ops that do not are `none`.
enum class scale_rule : std::uint8_t { none, linear, positive };

/// Which arithmetic an elementwise op is (the fact NormElemWise and FuseAddMul use); an op declares
/// it through its kernel (elementwise.hpp). `reflected` methods (__rsub__) compute other OP self.
enum class arith_kind : std::uint8_t { none, add, sub, mul, div, neg };

/// The params of an op that has no non-tensor arguments.
struct no_params {
  friend constexpr bool operator==(no_params, no_params) noexcept { return true; }
};

template <class Op>
concept op_definition = requires {
  { Op::name } -> std::convertible_to<std::string_view>;
  { Op::target } -> std::convertible_to<std::string_view>;
  { Op::kind } -> std::convertible_to<call_kind>;
  Op::operands;
  Op::fields;
  typename Op::params;
};

/// The op's scale_rule (none unless it declares one).
template <class Op>
consteval scale_rule scaling_of() {
  if constexpr (requires { Op::scaling; })
    return Op::scaling;
  else
    return scale_rule::none;
}

/// Whether f(f(x)) = f(x) for the op f (a unary op without params declares
/// `static constexpr bool idempotent = true;`): simplify drops the outer call.
template <class Op>
consteval bool idempotent_of() {
  if constexpr (requires { Op::idempotent; })
    return Op::idempotent;
  else
    return false;
}

/// Whether the op is an in-place tensor method (x += y recorded as x.__iadd__(y, )): its result keeps
/// its first operand's shape, and rewrites keep the call as it was written.
template <class Op>
consteval bool in_place_of() {
  if constexpr (requires { Op::in_place; })
    return Op::in_place;
  else
    return false;
}

/// Whether constant folding may evaluate the op ahead of time: true unless the op declares
/// `static constexpr bool foldable = false;` (it has an effect besides its result).
template <class Op>
consteval bool foldable_of() {
  if constexpr (requires { Op::foldable; })
    return Op::foldable;
  else
    return true;
}

/// Calls f(name, value, keyword_only) for each non-tensor argument of `p`, in canonical order.
template <class Op, class F>
constexpr void for_each_param(const typename Op::params& p, F&& f) {
  std::apply([&](const auto&... fl) { (f(fl.name, p.*(fl.member), fl.keyword_only), ...); }, Op::fields);
}

/// Number of non-tensor arguments of an op.
template <class Op>
inline constexpr std::size_t param_count_v = std::tuple_size_v<std::remove_cvref_t<decltype(Op::fields)>>;

/// "stride=(2, 2), padding=(1, 1)" style rendering of params (all of them, for messages).
template <class Op>
std::string params_repr(const typename Op::params& p) {
  std::string s;
  for_each_param<Op>(p, [&](std::string_view name, const auto& value, bool) {
    if (!s.empty()) s += ", ";
    s += std::string(name) + "=" + repr(value);
  });
  return s;
}

template <class T>
inline constexpr bool is_tensor_tuple_v = false;
template <class... T>
inline constexpr bool is_tensor_tuple_v<std::tuple<T...>> = (std::derived_from<T, Tensor> && ...);

/// A list of tensors: a vector, a span, or a std::tuple (the spelling that also works while tracing).
template <class T>
concept tensor_sequence = std::same_as<std::remove_cvref_t<T>, std::vector<Tensor>> ||
                          std::same_as<std::remove_cvref_t<T>, std::span<const Tensor>> ||
                          is_tensor_tuple_v<std::remove_cvref_t<T>>;

/// A C++ number (not bool) or a tmod::c<V> compile-time constant, used where an op takes a scalar.
template <class T>
concept scalar_operand = (std::is_arithmetic_v<std::remove_cvref_t<T>> && !std::same_as<std::remove_cvref_t<T>, bool>) ||
                         is_constant_scalar_v<std::remove_cvref_t<T>>;

/// Arguments that make a call eager: every operand is a concrete value (Tensor or a class derived
/// from it, such as nn's Parameter and Buffer).
template <class T>
concept eager_operand = std::derived_from<std::remove_cvref_t<T>, Tensor> || std::same_as<std::remove_cvref_t<T>, none_t> ||
                        scalar_operand<T> || tensor_sequence<T>;

/// Whether each argument suits the operand kind it is passed for (a number is no tensor, and
/// tmod::none is only for optional tensors).
template <class Op, class... A>
consteval bool operands_fit() {
  static_assert(Op::operands.size() == sizeof...(A), "tracemod internal: operand count differs from the op's definition");
  constexpr std::array<bool, sizeof...(A)> scalar{scalar_operand<A>...};
  constexpr std::array<bool, sizeof...(A)> absent{std::same_as<std::remove_cvref_t<A>, none_t>...};
  for (std::size_t i = 0; i < sizeof...(A); ++i) {
    const operand_kind k = Op::operands[i].kind;
    if (scalar[i] && k != operand_kind::tensor_or_scalar) return false;
    if (absent[i] && k != operand_kind::optional_tensor) return false;
  }
  return true;
}

template <class Op>
struct call_forms;  // functional/call.hpp: the call operators every op gets from its definition

template <class Op>
struct op_base : call_forms<Op> {
  template <class... A>
  static decltype(auto) apply(const auto& params, const A&... args) {
    static_assert(operands_fit<Op, A...>(),
                  "tracemod: a functional op received a number or tmod::none where it needs a tensor; pass a "
                  "tmod::Tensor (or, while tracing, a symbolic tensor)");
    if constexpr ((eager_operand<A> && ...)) {
      return Op::eager(params, args...);
    } else if constexpr (requires { tracemod_apply(Op{}, params, args...); }) {
      return tracemod_apply(Op{}, params, args...);
    } else {
      static_assert(::tracemod::detail::always_false_v<A...>,
                    "tracemod: every tensor argument of a functional op must be a tmod::Tensor, a symbolic "
                    "expression from tmod::symbolic_trace, or a tmod::Sym (numbers are allowed where the op "
                    "takes a scalar); convert the offending argument or call the op with the right operand");
    }
  }
};

struct op_entry;  // functional/registry.hpp

/// Adds Op to the op registry, from its definition (functional/registry.hpp defines it; a header
/// that registers an op includes that header). Throws value_error if Op's target is taken.
template <class Op>
const op_entry& register_op();

/// Registers an op once per program, beside its definition: `TRACEMOD_REGISTER_OP(relu_fn);` at
/// namespace scope, with the op's unqualified type name.
#define TRACEMOD_REGISTER_OP(Op) \
  inline const ::tracemod::functional::op_entry& tracemod_registered_##Op = ::tracemod::functional::register_op<Op>()

/// TRACEMOD_REGISTER_OP for the library's own ops (in namespace tracemod::functional). Registering
/// an op compiles its kernels, so a program that compiles the library separately
/// (core/extern_template.hpp) declares the registration extern in every unit but the one that
/// includes <tracemod/instantiate.hpp>, where the same line defines it.
#if defined(TRACEMOD_INSTANTIATE_TEMPLATES)
#define TRACEMOD_REGISTER_BUILTIN_OP(Op) \
  template const op_entry& register_op<Op>(); \
  TRACEMOD_REGISTER_OP(Op)
#else
#define TRACEMOD_REGISTER_BUILTIN_OP(Op) \
  TRACEMOD_EXTERN_TEMPLATE(const op_entry& register_op<Op>()) \
  TRACEMOD_REGISTER_OP(Op)
#endif

/// Rejects an undefined (default-constructed) tensor, naming the op and the operand.
inline void require_defined(std::string_view op, std::string_view operand_name, const Tensor& t) {
  if (!t.defined()) throw value_error(std::string(op) + ": operand '" + std::string(operand_name) + "' is an undefined tensor");
}

/// The shapes of tensors an op joins (stack, concat), which share one dtype, float32 or int32
/// (shapes built as values); dtype_error naming the op and the operand otherwise.
inline std::vector<Shape> joined_shapes_of(std::string_view op, std::span<const Tensor> inps) {
  std::vector<Shape> shapes;
  for (std::size_t i = 0; i < inps.size(); ++i) {
    const std::string operand = "inps[" + std::to_string(i) + "]";
    require_defined(op, operand, inps[i]);
    if (inps[i].dtype() != inps[0].dtype() || (inps[i].dtype() != DType::float32 && inps[i].dtype() != DType::int32))
      throw dtype_error(std::string(op) + ": operand '" + operand + "' has dtype " + std::string(dtype_name(inps[i].dtype())) +
                        " and inps[0] " + std::string(dtype_name(inps[0].dtype())) +
                        "; joined tensors share one dtype, float32 or int32");
    shapes.push_back(inps[i].shape());
  }
  return shapes;
}

/// Rejects tensors the kernels cannot run (float32 only), naming the op and the operand.
inline void require_float32(std::string_view op, std::string_view operand_name, const Tensor& t) {
  require_defined(op, operand_name, t);
  if (t.dtype() != DType::float32)
    throw dtype_error(std::string(op) + ": operand '" + std::string(operand_name) + "' has dtype " +
                      std::string(dtype_name(t.dtype())) + " (shape " + t.shape().to_string() +
                      "), but the op computes in float32");
}

}  // namespace tracemod::functional

#include <tracemod/functional/call.hpp>  // last: call_forms builds on the definitions above
