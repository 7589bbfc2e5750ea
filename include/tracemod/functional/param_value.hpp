// Conversions between the C++ types of op params (pair2, int_list, optional<...>, numbers, bool)
// and tmod::Value, for the type-erased op registry: a graph stores an op's params as Values (what it
// prints and saves), and the interpreter turns them back into the op's params struct once per plan.
#pragma once

#include <tracemod/core/value.hpp>
#include <tracemod/functional/params.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace tracemod::functional {

/// The Value a param holds: integers stay integers, pairs and lists become tuples, nullopt is None.
inline Value to_value(std::int64_t v) { return Value(v); }
inline Value to_value(double v) { return Value(v); }
inline Value to_value(bool v) { return Value(v); }
inline Value to_value(const std::string& v) { return Value(v); }
inline Value to_value(const pair2& v) { return Value::tuple({Value(v.h), Value(v.w)}); }
inline Value to_value(const int_list& v) {
  ValueList items;
  for (std::int64_t x : v) items.emplace_back(x);
  return Value::tuple(std::move(items));
}
template <class T>
Value to_value(const std::optional<T>& v) {
  return v ? to_value(*v) : Value(none);
}

namespace detail {

[[noreturn]] inline void bad_param(std::string_view op, std::string_view param, std::string_view expected,
                                   const Value& got) {
  throw value_error(std::string(op) + ": parameter '" + std::string(param) + "' must be " + std::string(expected) +
                    ", got " + got.repr());
}

template <class T>
struct param_from_value;

template <>
struct param_from_value<std::int64_t> {
  static std::int64_t get(const Value& v, std::string_view op, std::string_view name) {
    if (v.kind() != Value::Kind::integer) bad_param(op, name, "an integer", v);
    return v.integer();
  }
};
template <>
struct param_from_value<double> {
  static double get(const Value& v, std::string_view op, std::string_view name) {
    if (!v.is_number()) bad_param(op, name, "a number", v);
    return v.number();
  }
};
template <>
struct param_from_value<bool> {
  static bool get(const Value& v, std::string_view op, std::string_view name) {
    if (v.kind() != Value::Kind::boolean) bad_param(op, name, "a bool", v);
    return v.boolean();
  }
};
template <>
struct param_from_value<std::string> {
  static std::string get(const Value& v, std::string_view op, std::string_view name) {
    if (v.kind() != Value::Kind::string) bad_param(op, name, "a string", v);
    return v.string();
  }
};
template <>
struct param_from_value<pair2> {
  static pair2 get(const Value& v, std::string_view op, std::string_view name) {
    if (v.kind() == Value::Kind::integer) return pair2{v.integer()};
    if (v.is_sequence() && v.size() == 2 && v[0].kind() == Value::Kind::integer &&
        v[1].kind() == Value::Kind::integer)
      return pair2{v[0].integer(), v[1].integer()};
    bad_param(op, name, "an integer or a pair of integers", v);
  }
};
template <>
struct param_from_value<int_list> {
  static int_list get(const Value& v, std::string_view op, std::string_view name) {
    if (!v.is_sequence() || v.size() > int_list::max_size)
      bad_param(op, name, "a tuple of at most " + std::to_string(int_list::max_size) + " integers", v);
    int_list out;
    for (const Value& x : v.items()) {
      if (x.kind() != Value::Kind::integer) bad_param(op, name, "a tuple of integers", v);
      out.push_back(x.integer());
    }
    return out;
  }
};
template <class T>
struct param_from_value<std::optional<T>> {
  static std::optional<T> get(const Value& v, std::string_view op, std::string_view name) {
    if (v.is_none()) return std::nullopt;
    return param_from_value<T>::get(v, op, name);
  }
};

}  // namespace detail

/// The param value `v` as type T (the type of the op's params member); throws value_error naming
/// the op and the param when `v` does not fit.
template <class T>
T from_value(const Value& v, std::string_view op, std::string_view param) {
  return detail::param_from_value<T>::get(v, op, param);
}

}  // namespace tracemod::functional
