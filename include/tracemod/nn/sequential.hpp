// Sequential<A, B, ...>: a typed chain of modules named "0", "1", ...; forward feeds each one's
// output to the next. Not builtin (the tracer traces through it, as MegEngine does).
#pragma once

#include <tracemod/nn/reflection.hpp>

#include <boost/hana/tuple.hpp>

#include <concepts>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tracemod::nn {

namespace detail {

template <std::size_t I, class M>
struct sequential_leaf {
  M module;
};

template <class Indices, class... Ms>
struct sequential_storage;

template <std::size_t... I, class... Ms>
struct sequential_storage<std::index_sequence<I...>, Ms...> : sequential_leaf<I, Ms>... {
  sequential_storage() = default;
  explicit sequential_storage(Ms... ms)
    requires(sizeof...(Ms) > 0)
      : sequential_leaf<I, Ms>{std::move(ms)}... {}
};

}  // namespace detail

template <class... Ms>
class Sequential : public Module, public detail::sequential_storage<std::index_sequence_for<Ms...>, Ms...> {
  static_assert((reflected_module<Ms> && ...),
                "tmod::nn::Sequential<Ms...>: every element must be a module class that declares TM_MODULE");
  using storage = detail::sequential_storage<std::index_sequence_for<Ms...>, Ms...>;
  template <std::size_t I>
  using element = std::tuple_element_t<I, std::tuple<Ms...>>;

 public:
  Sequential()
    requires(std::default_initializable<Ms> && ...)
  = default;
  explicit Sequential(Ms... modules)
    requires(sizeof...(Ms) > 0)
      : storage(std::move(modules)...) {}

  static constexpr auto tracemod_members() { return members(std::index_sequence_for<Ms...>{}); }
  TRACEMOD_DETAIL_MODULE_BASICS(Sequential, "Sequential", false)
  TRACEMOD_DETAIL_REFLECTED_MEMBERS(Sequential)

  [[nodiscard]] static constexpr std::size_t size() noexcept { return sizeof...(Ms); }

  template <std::size_t I>
  [[nodiscard]] element<I>& get() noexcept {
    return static_cast<detail::sequential_leaf<I, element<I>>&>(*this).module;
  }
  template <std::size_t I>
  [[nodiscard]] const element<I>& get() const noexcept {
    return static_cast<const detail::sequential_leaf<I, element<I>>&>(*this).module;
  }

  template <class X>
  auto forward(const X& x) const {
    return chain<0>(x);
  }

 private:
  template <std::size_t... I>
  static constexpr auto members(std::index_sequence<I...>) {
    return boost::hana::make_tuple(
        member_descriptor<Sequential, tracemod::detail::index_name<I>(), &detail::sequential_leaf<I, Ms>::module>{}...);
  }

  template <std::size_t I, class X>
  auto chain(const X& x) const {
    if constexpr (I == sizeof...(Ms)) {
      return x;
    } else {
      auto y = get<I>()(x);
      return chain<I + 1>(y);
    }
  }
};

template <class... Ms>
Sequential(Ms...) -> Sequential<Ms...>;

}  // namespace tracemod::nn

// Structured bindings: auto& [conv, bn] = downsample;
template <class... Ms>
struct std::tuple_size<tracemod::nn::Sequential<Ms...>> : std::integral_constant<std::size_t, sizeof...(Ms)> {};
template <std::size_t I, class... Ms>
struct std::tuple_element<I, tracemod::nn::Sequential<Ms...>> : std::tuple_element<I, std::tuple<Ms...>> {};
