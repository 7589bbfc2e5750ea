// The call forms of every functional op, generated from its definition (operands and fields), so
// that no op spells out its own signature:
//   F::conv2d(x, w, b, 2, 1)             operands, then positional params in canonical order
//   F::conv2d(x, w, b, {.stride = 2})    operands, then the params struct (designated initialisers)
//   F::max_pool2d(x, 3, {.stride = 2})   some positional params, then the params struct for the rest
//   F::conv2d(x, w)                      trailing optional tensor operands omitted (tmod::none)
// The rule is PyTorch's: positional arguments fill the operands first, then the positional params,
// so an optional tensor operand may be omitted only when no positional param follows
// (F::conv2d(x, w, tmod::none, 2)); fewer positional params than the op has keep their defaults;
// keyword-only fields never take a positional argument; `required` fields (pooling's kernel_size,
// reshape's target_shape) must be given positionally. Each positional value converts to its field's
// type: an integer to int64 or to a (h, w) pair, {h, w} to a pair, bool only to bool, a number to
// double, a string literal or view to a string, tmod::none or a value to an optional, {a, b, ...}
// or an int_list to an int_list. Anything else is one static_assert (for an int_list param, no
// matching call form); an unsigned value beyond int64 is a value_error naming the op and the param.
//
// op.hpp includes this header at its end: op_base derives from call_forms, which needs the
// definitions above it.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/meta.hpp>
#include <tracemod/core/none.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/params.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tracemod::functional {

/// The most positional params an op may have (the pooling ops have 5); each one more is one more
/// call form per op to resolve.
inline constexpr std::size_t max_positional_params = 6;

namespace detail {

/// Counts that decide which call forms an op has.
struct call_shape {
  std::size_t operands = 0, required_operands = 0, positional = 0, required_positional = 0;
};

template <class Op>
consteval call_shape call_shape_of() {
  call_shape s{Op::operands.size(), Op::operands.size(), 0, 0};
  while (s.required_operands > 0 && Op::operands[s.required_operands - 1].kind == operand_kind::optional_tensor)
    --s.required_operands;
  bool keyword_seen = false, optional_seen = false;
  const auto count = [&](const auto& f) {
    // A violation is a compile error here: positional fields come first, required ones lead them.
    if (f.keyword_only) {
      if (f.required) throw "tracemod internal: a keyword-only field cannot be required";
      keyword_seen = true;
      return;
    }
    if (keyword_seen) throw "tracemod internal: a positional field follows a keyword-only one";
    ++s.positional;
    if (!f.required) {
      optional_seen = true;
    } else {
      if (optional_seen) throw "tracemod internal: a required field follows an optional one";
      ++s.required_positional;
    }
  };
  std::apply([&](const auto&... f) { (count(f), ...); }, Op::fields);
  return s;
}

template <class Op>
inline constexpr call_shape call_shape_v = call_shape_of<Op>();

/// The call forms take 1 to 3 operands (an op with more declares its own call operator, as
/// batch_norm does).
inline constexpr std::size_t max_form_operands = 3;

/// Whether an op has the call forms with `n` operands and `k` positional params (each with and
/// without the params struct last).
constexpr bool form_fits(const call_shape& s, std::size_t n, std::size_t k) {
  if (n < s.required_operands || n > s.operands) return false;
  if (k < s.required_positional || k > s.positional) return false;
  return n == s.operands || k == 0;
}

/// Whether some call form of an op takes `count` arguments, the last of which is (or is not) the
/// params struct.
constexpr bool count_fits(const call_shape& s, std::size_t count, bool params_last) {
  for (std::size_t n = 1; n <= max_form_operands; ++n)
    for (std::size_t k = 0; k <= max_positional_params; ++k)
      if (form_fits(s, n, k) && (count == n + k || (params_last && count == n + k + 1))) return true;
  return false;
}

template <class Op, class... A>
consteval bool params_last() {
  if constexpr (sizeof...(A) == 0)
    return false;
  else
    return std::convertible_to<const typename decltype((std::type_identity<A>{}, ...))::type&, typename Op::params>;
}

struct no_field {};

template <class F>
struct field_value_of;
template <class P, class T>
struct field_value_of<field<P, T>> {
  using type = T;
};

/// The value type of the op's I-th field (no_field past the end, for forms the op does not have).
template <class Op, std::size_t I, bool = (I < param_count_v<Op>)>
struct field_value {
  using type = no_field;
};
template <class Op, std::size_t I>
struct field_value<Op, I, true> {
  using type = typename field_value_of<std::remove_cvref_t<std::tuple_element_t<I, std::remove_cvref_t<decltype(Op::fields)>>>>::type;
};

template <class U>
concept integer_value = std::integral<U> && !std::same_as<U, bool>;

/// Whether a positional value of type U converts to a field of type T.
template <class T, class U>
inline constexpr bool converts_v = std::same_as<T, U>;
template <class U>
inline constexpr bool converts_v<std::int64_t, U> = integer_value<U>;
template <class U>
inline constexpr bool converts_v<double, U> = integer_value<U> || std::floating_point<U>;
template <class U>
inline constexpr bool converts_v<pair2, U> = integer_value<U> || std::same_as<U, pair2>;
template <class U>
inline constexpr bool converts_v<std::string, U> = std::is_convertible_v<const U&, std::string_view>;
template <class T, class U>
inline constexpr bool converts_v<std::optional<T>, U> = std::same_as<U, none_t> || std::same_as<U, std::nullopt_t> ||
                                                        std::same_as<U, std::optional<T>> || converts_v<T, U>;

template <class T>
inline constexpr bool is_pair_field_v = std::same_as<T, pair2> || std::same_as<T, std::optional<pair2>>;

template <class Op, std::size_t I, integer_value U>
std::int64_t to_int64(U v) {
  if constexpr (std::is_unsigned_v<U> && sizeof(U) >= sizeof(std::int64_t)) {
    if (v > static_cast<U>(std::numeric_limits<std::int64_t>::max()))
      throw value_error(std::string(Op::target) + ": positional argument '" + std::string(std::get<I>(Op::fields).name) +
                        "' = " + std::to_string(v) + " does not fit in int64");
  }
  return static_cast<std::int64_t>(v);
}

template <class T>
inline constexpr bool is_optional_v = false;
template <class T>
inline constexpr bool is_optional_v<std::optional<T>> = true;

template <class Op, std::size_t I, class T, class U>
T to_field(const U& v) {
  if constexpr (!converts_v<T, U>) {
    static_assert(::tracemod::detail::always_false_v<U>,
                  "tracemod: a positional argument of a functional op has a type its param cannot take: pass an "
                  "integer for int64 params and (h, w) pairs, {h, w} for a pair, true/false for flags, a number for "
                  "doubles, tmod::none or a value for optional params, {a, b, ...} for int lists (the params are the "
                  "op's `fields`, in order)");
    return T{};
  } else if constexpr (std::same_as<T, U>) {
    return v;
  } else if constexpr (std::same_as<U, none_t> || std::same_as<U, std::nullopt_t>) {
    return T{};
  } else if constexpr (is_optional_v<T>) {
    return T(to_field<Op, I, typename T::value_type>(v));
  } else if constexpr (std::same_as<T, double>) {
    return static_cast<double>(v);
  } else if constexpr (std::same_as<T, std::string>) {
    return std::string(std::string_view(v));
  } else {
    return T(to_int64<Op, I>(v));  // int64 or pair2 from an integer
  }
}

/// A positional argument for the op's I-th field, converted to the field's type. (int_list fields
/// get their own kind: g++ 12 lets a designated-initialiser list reach a class that declares an
/// initializer_list constructor, even a disabled one, which would make {.stride = 2} ambiguous.)
template <class Op, std::size_t I, class T = typename field_value<Op, I>::type>
struct positional_arg {
  T value{};

  template <class U>
  positional_arg(const U& v) : value(to_field<Op, I, T>(v)) {}  // NOLINT(google-explicit-constructor)
  /// {h, w} for a (height, width) pair.
  template <class H, class W>
  positional_arg(const H& h, const W& w) {
    if constexpr (is_pair_field_v<T> && integer_value<H> && integer_value<W>)
      value = pair2(to_int64<Op, I>(h), to_int64<Op, I>(w));
    else
      static_assert(::tracemod::detail::always_false_v<H, W>,
                    "tracemod: a braced pair {h, w} is a positional argument only for a (height, width) param such "
                    "as kernel_size, stride or padding, and takes two integers");
  }
};
/// {a, b, ...} for an int_list (reshape's target_shape, transpose's pattern).
template <class Op, std::size_t I>
struct positional_arg<Op, I, int_list> {
  int_list value;

  // No constructor template: g++ 12 matches a designated-initialiser list such as {.keepdims = true}
  // against one by position, which would make the call ambiguous with the params struct when the
  // int_list field is optional (the reductions' axis).
  positional_arg(const int_list& v) : value(v) {}  // NOLINT(google-explicit-constructor)
  positional_arg(std::initializer_list<std::int64_t> v) : value(v) {}
};

/// Op::params with its first positional fields replaced by the given positional arguments.
template <class Op, std::size_t... I, class... T>
typename Op::params with_positional(typename Op::params p, const positional_arg<Op, I, T>&... v) {
  ((p.*(std::get<I>(Op::fields).member) = v.value), ...);
  return p;
}

/// Op::apply with the omitted trailing optional operands passed as tmod::none.
template <class Op, class... A>
decltype(auto) apply_padded(const typename Op::params& p, const A&... a) {
  static_assert(call_shape_v<Op>.positional <= max_positional_params,
                "tracemod internal: an op has more positional params than max_positional_params");
  if constexpr (sizeof...(A) < Op::operands.size())
    return apply_padded<Op>(p, a..., none);
  else
    return Op::apply(p, a...);
}

/// The call forms taking K positional params, with 1 to 3 operands. The positional parameters have concrete
/// types, so braced values ({2, 1}, {.stride = 2}) convert; type_identity keeps Op out of deduction.
template <class Op, std::size_t K, class = std::make_index_sequence<K>>
struct call_form;
template <class Op, std::size_t K, std::size_t... I>
struct call_form<Op, K, std::index_sequence<I...>> {
  template <class O, std::size_t J>
  using arg = std::type_identity_t<positional_arg<O, J>>;
  template <class O>
  using params_of = std::type_identity_t<typename O::params>;

  template <class A0, class O = Op>
    requires(form_fits(call_shape_v<O>, 1, K))
  decltype(auto) operator()(const A0& a0, arg<O, I>... v) const {
    return apply_padded<O>(with_positional<O>({}, v...), a0);
  }
  template <class A0, class O = Op>
    requires(form_fits(call_shape_v<O>, 1, K))
  decltype(auto) operator()(const A0& a0, arg<O, I>... v, const params_of<O>& p) const {
    return apply_padded<O>(with_positional<O>(p, v...), a0);
  }
  template <class A0, class A1, class O = Op>
    requires(form_fits(call_shape_v<O>, 2, K))
  decltype(auto) operator()(const A0& a0, const A1& a1, arg<O, I>... v) const {
    return apply_padded<O>(with_positional<O>({}, v...), a0, a1);
  }
  template <class A0, class A1, class O = Op>
    requires(form_fits(call_shape_v<O>, 2, K))
  decltype(auto) operator()(const A0& a0, const A1& a1, arg<O, I>... v, const params_of<O>& p) const {
    return apply_padded<O>(with_positional<O>(p, v...), a0, a1);
  }
  template <class A0, class A1, class A2, class O = Op>
    requires(form_fits(call_shape_v<O>, 3, K))
  decltype(auto) operator()(const A0& a0, const A1& a1, const A2& a2, arg<O, I>... v) const {
    return apply_padded<O>(with_positional<O>({}, v...), a0, a1, a2);
  }
  template <class A0, class A1, class A2, class O = Op>
    requires(form_fits(call_shape_v<O>, 3, K))
  decltype(auto) operator()(const A0& a0, const A1& a1, const A2& a2, arg<O, I>... v, const params_of<O>& p) const {
    return apply_padded<O>(with_positional<O>(p, v...), a0, a1, a2);
  }
};

/// The result of a call no form takes (never defined: such a call does not compile).
struct no_call_form {
  template <class T>
  operator T() const;  // NOLINT(google-explicit-constructor)
};

template <class Op, class Ks>
struct call_form_set;
template <class Op, std::size_t... K>
struct call_form_set<Op, std::index_sequence<K...>> : call_form<Op, K>... {
  using call_form<Op, K>::operator()...;

  /// Arguments no form takes by their count: one readable error instead of a list of candidates.
  /// (The result converts to anything, so that the static_assert is the only error.)
  template <class... A, class O = Op>
    requires(!count_fits(call_shape_v<O>, sizeof...(A), params_last<O, A...>()))
  no_call_form operator()(const A&...) const {
    static_assert(::tracemod::detail::always_false_v<A...>,
                  "tracemod: a functional op was called with the wrong number of arguments: pass its tensor "
                  "operands in order, then at most as many positional params as it has (in the order of its "
                  "`fields`; required ones such as kernel_size first), optionally followed by its params struct: "
                  "F::conv2d(x, w, b, 2, 1), F::conv2d(x, w, b, {.stride = 2}), F::max_pool2d(x, 3, {.stride = 2})");
    return {};
  }
};

}  // namespace detail

/// Every call form of an op (a base of op_base).
template <class Op>
struct call_forms : detail::call_form_set<Op, std::make_index_sequence<max_positional_params + 1>> {};

}  // namespace tracemod::functional
