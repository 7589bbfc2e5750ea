// The DType param of an op (astype's dtype, quantize's): printed and saved by its name (float32,
// int32, bool, uint8, int8).
#pragma once

#include <tracemod/core/dtype.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/functional/param_value.hpp>

#include <string>
#include <string_view>

namespace tracemod {

/// A DType param as a graph prints and saves it: its name.
inline std::string repr(DType d) { return std::string(dtype_name(d)); }
inline Value to_value(DType d) { return Value(std::string(dtype_name(d))); }

}  // namespace tracemod

namespace tracemod::functional {

using tracemod::repr;
using tracemod::to_value;

namespace detail {

template <>
struct param_from_value<DType> {
  static DType get(const Value& v, std::string_view op, std::string_view name) {
    if (v.kind() == Value::Kind::string)
      for (DType d : all_dtypes)
        if (v.string() == dtype_name(d)) return d;
    bad_param(op, name, "a dtype name (float32, int32, bool, uint8 or int8)", v);
  }
};

}  // namespace detail

}  // namespace tracemod::functional
