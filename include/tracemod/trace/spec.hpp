// Symbolic arguments for tmod::symbolic_trace: tmod::spec({3, 4}) (shape known at trace time) and
// tmod::spec<3, 4>() (shape known at compile time, so shape errors are compile errors).
#pragma once

#include <tracemod/core/dtype.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/core/shape.hpp>

#include <cstdint>
#include <string>

namespace tracemod {

/// A graph input whose shape is given at run time; optionally named (the name a lowered graph
/// prints for it, MegEngine's forward parameter name).
struct dynamic_spec {
  Shape shape;
  DType dtype = DType::float32;
  std::string name;
};

/// A graph input whose shape is part of its type.
template <std::int64_t... D>
struct static_spec {
  static_assert(((D >= 0) && ...), "tmod::spec<...>: extents must be non-negative");
  static constexpr Shape shape{D...};
  DType dtype = DType::float32;
  std::string name;
};

[[nodiscard]] inline dynamic_spec spec(const Shape& shape, DType dtype = DType::float32, std::string name = {}) {
  if (dtype != DType::float32)
    throw dtype_error("tmod::spec: symbolic tensors are float32 (got " + std::string(dtype_name(dtype)) + ")");
  return {shape, dtype, std::move(name)};
}

template <std::int64_t... D>
[[nodiscard]] static_spec<D...> spec(std::string name = {}) {
  return {DType::float32, std::move(name)};
}

}  // namespace tracemod
