// Tensor factories: tensor({...}) from nested braces, zeros/ones/full, arange, seeded random tensors.
#pragma once

#include <tracemod/core/random.hpp>
#include <tracemod/core/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tracemod {

namespace detail {

template <class T>
concept element_literal = std::is_arithmetic_v<T>;

/// The element type a literal of type T is stored as: bool literals make bool tensors, other
/// integral ones int32 (as MegEngine's Tensor([1, 2]) does), floating ones float32.
template <element_literal T>
using stored_literal_t =
    std::conditional_t<std::is_same_v<T, bool>, bool, std::conditional_t<std::is_integral_v<T>, std::int32_t, float>>;

/// Walks nested braces depth-first, recording the extents met first and rejecting ragged lists.
template <class T>
struct nested_collector {
  Shape shape;
  std::vector<T> values;

  template <class L>
  void visit(const std::initializer_list<L>& list, std::size_t depth) {
    const auto n = static_cast<std::int64_t>(list.size());
    if (depth == shape.rank()) {
      shape.push_back(n);
    } else if (shape[depth] != n) {
      throw shape_error("tensor: ragged nested list: " + std::to_string(n) + " elements at depth " +
                        std::to_string(depth) + " where an earlier list had " + std::to_string(shape[depth]));
    }
    for (const L& item : list) {
      if constexpr (element_literal<L>)
        values.push_back(static_cast<T>(item));
      else
        visit(item, depth + 1);
    }
  }
};

template <class Elem, class L>
Tensor tensor_from_braces(const std::initializer_list<L>& list) {
  using Stored = stored_literal_t<Elem>;
  nested_collector<Stored> c;
  c.visit(list, 0);
  Tensor t = Tensor::empty(c.shape, dtype_of_v<Stored>, "tensor");
  std::copy(c.values.begin(), c.values.end(), t.data<Stored>());
  return t;
}

template <class Fill>
Tensor generate(const Shape& shape, DType dtype, std::string_view op, Fill fill) {
  Tensor t = Tensor::empty(shape, dtype, op);
  if (dtype == DType::float32) {
    for (float& v : t.values<float>()) v = static_cast<float>(fill());
  } else if (dtype == DType::boolean) {
    for (bool& v : t.values<bool>()) v = static_cast<double>(fill()) != 0.0;
  } else {
    visit_dtype(dtype, [&]<class T>(T) {
      for (T& v : t.values<T>()) v = static_cast<T>(fill());
    });
  }
  return t;
}

}  // namespace detail

/// tensor({1.f, 2.f}), tensor({{1, 2}, {3, 4}}) (int32), tensor({true, false}) (bool), ... up to rank 4
/// from braces.
template <detail::element_literal T>
[[nodiscard]] Tensor tensor(std::initializer_list<T> v) {
  return detail::tensor_from_braces<T>(v);
}
template <detail::element_literal T>
[[nodiscard]] Tensor tensor(std::initializer_list<std::initializer_list<T>> v) {
  return detail::tensor_from_braces<T>(v);
}
template <detail::element_literal T>
[[nodiscard]] Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> v) {
  return detail::tensor_from_braces<T>(v);
}
template <detail::element_literal T>
[[nodiscard]] Tensor tensor(
    std::initializer_list<std::initializer_list<std::initializer_list<std::initializer_list<T>>>> v) {
  return detail::tensor_from_braces<T>(v);
}

/// A tensor of `shape` holding a copy of `values` (row-major).
template <class T>
  requires is_element_type_v<T>
[[nodiscard]] Tensor tensor(std::span<const T> values, const Shape& shape) {
  if (static_cast<std::int64_t>(values.size()) != shape.numel("tensor"))
    throw shape_error("tensor: " + std::to_string(values.size()) + " values do not fill shape " + shape.to_string());
  Tensor t = Tensor::empty(shape, dtype_of_v<T>, "tensor");
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

/// A rank-0 tensor.
[[nodiscard]] inline Tensor scalar_tensor(float value) {
  Tensor t = Tensor::empty(Shape{}, DType::float32);
  t.data<float>()[0] = value;
  return t;
}

[[nodiscard]] inline Tensor full(const Shape& shape, double value, DType dtype = DType::float32) {
  return detail::generate(shape, dtype, "full", [value] { return value; });
}
[[nodiscard]] inline Tensor zeros(const Shape& shape, DType dtype = DType::float32) {
  return detail::generate(shape, dtype, "zeros", [] { return 0.0; });
}
[[nodiscard]] inline Tensor ones(const Shape& shape, DType dtype = DType::float32) {
  return detail::generate(shape, dtype, "ones", [] { return 1.0; });
}

/// Values start, start + step, ... below stop (above it for a negative step); float32 by default,
/// as MegEngine's arange.
[[nodiscard]] inline Tensor arange(double start, double stop, double step = 1.0, DType dtype = DType::float32) {
  if (step == 0.0 || !std::isfinite(step) || !std::isfinite(start) || !std::isfinite(stop))
    throw value_error("arange: start, stop and step must be finite and step non-zero (got start=" +
                      std::to_string(start) + ", stop=" + std::to_string(stop) + ", step=" + std::to_string(step) + ")");
  const double count = std::ceil((stop - start) / step);  // may be inf: (stop - start) can overflow
  // Checked before the cast, which is undefined behaviour for values beyond int64.
  if (!(count <= static_cast<double>(max_tensor_bytes / static_cast<std::int64_t>(itemsize(dtype)))))
    throw shape_error("arange: start=" + std::to_string(start) + ", stop=" + std::to_string(stop) + ", step=" +
                      std::to_string(step) + " gives " + std::to_string(count) +
                      " elements, more than the largest allocation (" + std::to_string(max_tensor_bytes) +
                      " bytes) holds");
  const auto n = static_cast<std::int64_t>(std::max(0.0, count));
  std::int64_t i = 0;
  return detail::generate(Shape{n}, dtype, "arange", [&] { return start + static_cast<double>(i++) * step; });
}
[[nodiscard]] inline Tensor arange(double stop) { return arange(0.0, stop); }

/// Standard-normal float32 values; the same seed gives the same tensor everywhere.
[[nodiscard]] inline Tensor randn(const Shape& shape, std::uint64_t seed = 0) {
  Generator g(seed);
  return detail::generate(shape, DType::float32, "randn", [&] { return g.normal(); });
}

/// Uniform float32 values in [low, high); the same seed gives the same tensor everywhere.
[[nodiscard]] inline Tensor uniform(const Shape& shape, float low, float high, std::uint64_t seed = 0) {
  if (!(low <= high))
    throw value_error("uniform: low (" + std::to_string(low) + ") must not exceed high (" + std::to_string(high) + ")");
  Generator g(seed);
  return detail::generate(shape, DType::float32, "uniform", [&] { return g.uniform(low, high); });
}

}  // namespace tracemod
