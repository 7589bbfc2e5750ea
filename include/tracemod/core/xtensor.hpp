// The bridge to xtensor: a Tensor's buffer seen as an xtensor expression (no copy), and
// xtensor expressions evaluated into new Tensors.
//
// The only tracemod header that includes xtensor: keep it out of everything else (compile time).
#pragma once

#include <tracemod/core/dtype.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/core/tensor.hpp>

#include <xtensor/xadapt.hpp>
#include <xtensor/xbuffer_adaptor.hpp>
#include <xtensor/xexpression.hpp>
#include <xtensor/xlayout.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xoperation.hpp>
#include <xtensor/xshape.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace tracemod {

namespace detail {

/// Dynamic rank, stored inline up to rank 4 (xarray's own shape type).
using xt_shape = xt::dynamic_shape<std::size_t>;

template <class T>
auto adapt_buffer(T* data, const Shape& shape) {
  return xt::adapt<xt::layout_type::row_major>(data, static_cast<std::size_t>(shape.numel()), xt::no_ownership(),
                                               xt_shape(shape.begin(), shape.end()));
}

template <class T>
void check_xt_dtype(const Tensor& t) {
  if (!t.defined()) throw value_error("to_xt: the tensor is undefined (default-constructed)");
  if (t.dtype() != dtype_of_v<T>)
    throw dtype_error("to_xt: requested a view of " + std::string(dtype_name(dtype_of_v<T>)) + " elements on a " +
                      std::string(dtype_name(t.dtype())) + " tensor of shape " + t.shape().to_string());
}

}  // namespace detail

/// Row-major xtensor adaptor over a tensor's buffer (no ownership, no copy); `const T` for a
/// read-only view.
template <class T>
using xt_view = decltype(detail::adapt_buffer(std::declval<T*>(), Shape{}));

/// A writable xtensor view of `t`'s buffer: writes through it change `t` (and every tensor sharing
/// its buffer). Throws dtype_error unless `t` holds T. The view does not keep the buffer alive.
template <class T = float>
  requires is_element_type_v<T>
[[nodiscard]] xt_view<T> to_xt(Tensor& t) {
  detail::check_xt_dtype<T>(t);
  return detail::adapt_buffer(t.data<T>(), t.shape());
}

/// A read-only xtensor view of `t`'s buffer.
template <class T = float>
  requires is_element_type_v<T>
[[nodiscard]] xt_view<const T> to_xt(const Tensor& t) {
  detail::check_xt_dtype<T>(t);
  return detail::adapt_buffer(t.data<T>(), t.shape());
}

/// A view of a temporary tensor would dangle as soon as the statement ends: name the tensor first.
template <class T = float>
void to_xt(Tensor&&) = delete;
template <class T = float>
void to_xt(const Tensor&&) = delete;

/// Evaluates an xtensor expression into a new tensor of its shape. The element type is the
/// expression's value_type, which must be float or std::int32_t unless T asks for a conversion
/// (from_xt<float>(e) for a double expression).
template <class T = void, class E>
[[nodiscard]] Tensor from_xt(const xt::xexpression<E>& expression) {
  using value_type = typename E::value_type;
  using requested = std::conditional_t<std::is_void_v<T>, value_type, T>;
  static_assert(is_element_type_v<requested>,
                "from_xt: the expression's value_type is neither float nor std::int32_t; name the element "
                "type to convert to, e.g. from_xt<float>(e)");
  // Falls back to float only so that a failed static_assert is the sole error reported.
  using element = std::conditional_t<is_element_type_v<requested>, requested, float>;

  const E& e = expression.derived_cast();
  const auto& shape = e.shape();
  if (shape.size() > Shape::max_rank)
    throw shape_error("from_xt: the expression has rank " + std::to_string(shape.size()) +
                      ", above the maximum of " + std::to_string(Shape::max_rank));
  Tensor t = Tensor::empty(Shape(shape.begin(), shape.end()), dtype_of_v<element>);
  auto out = detail::adapt_buffer(t.data<element>(), t.shape());
  if constexpr (std::is_same_v<value_type, element>)
    xt::noalias(out) = e;
  else
    xt::noalias(out) = xt::cast<element>(e);
  return t;
}

}  // namespace tracemod
