// ModuleVariant<Ms...>: one module whose class is one of Ms, the element of a ModuleList or a
// ModuleDict that holds modules of several classes. Calling it calls the module it holds, so a
// forward that loops over such a container runs eagerly and traces (every class must return the
// same type for the arguments: a Tensor eagerly, a tmod::Sym while trace_module records).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/nn/reflection.hpp>

#include <concepts>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace tracemod::nn {

template <class... Ms>
class ModuleVariant {
  static_assert(sizeof...(Ms) >= 2, "tmod::nn::ModuleVariant<Ms...>: list at least two module classes");
  static_assert((reflected_module<Ms> && ...),
                "tmod::nn::ModuleVariant<Ms...>: every class must be a module class that declares TM_MODULE");

 public:
  /// Holds a copy of (or moves in) a module of one of the listed classes.
  template <class M>
    requires(std::same_as<std::remove_cvref_t<M>, Ms> || ...)
  ModuleVariant(M&& module)  // NOLINT: implicit, so {M::Linear(2, 3), M::ReLU{}} builds a list
      : held_(std::in_place_type<std::remove_cvref_t<M>>, std::forward<M>(module)) {}

  template <class M>
  [[nodiscard]] bool holds() const noexcept {
    return std::holds_alternative<M>(held_);
  }
  /// The held module as class M; throws module_error naming both classes if it is another one.
  template <class M>
  [[nodiscard]] M& get() {
    return const_cast<M&>(std::as_const(*this).template get<M>());
  }
  template <class M>
  [[nodiscard]] const M& get() const {
    if (const M* m = std::get_if<M>(&held_)) return *m;
    throw module_error("ModuleVariant::get: the element is a " + std::string(module().type_name()) + ", not a " +
                       std::string(M::tracemod_type_name));
  }

  [[nodiscard]] Module& module() noexcept { return const_cast<Module&>(std::as_const(*this).module()); }
  [[nodiscard]] const Module& module() const noexcept {
    return std::visit([](const auto& m) -> const Module& { return m; }, held_);
  }
  [[nodiscard]] std::string_view type_name() const noexcept { return module().type_name(); }

  /// Calls the held module (eagerly, or recording when an argument is symbolic).
  template <class... A>
  auto operator()(const A&... args) const {
    using R = std::remove_cvref_t<decltype(std::declval<const first&>()(args...))>;
    constexpr bool agree = (std::same_as<R, std::remove_cvref_t<decltype(std::declval<const Ms&>()(args...))>> && ...);
    static_assert(agree,
                  "tmod::nn::ModuleVariant: every module class of a mixed container must return the same type for "
                  "these arguments (a tmod::Tensor eagerly, a tmod::Sym while tracing)");
    if constexpr (agree) return std::visit([&](const auto& m) -> R { return m(args...); }, held_);
  }

  /// std::visit on the held module.
  template <class F>
  decltype(auto) visit(F&& f) const {
    return std::visit(std::forward<F>(f), held_);
  }
  template <class F>
  decltype(auto) visit(F&& f) {
    return std::visit(std::forward<F>(f), held_);
  }

 private:
  using first = std::tuple_element_t<0, std::tuple<Ms...>>;
  std::variant<Ms...> held_;
};

namespace detail {

/// The element type of a container of T, More...: T itself, or a ModuleVariant of them all.
template <class T, class... More>
using container_element_t = std::conditional_t<sizeof...(More) == 0, T, ModuleVariant<T, More...>>;

template <class E>
[[nodiscard]] const Module& element_module(const E& e) noexcept {
  if constexpr (std::derived_from<E, Module>)
    return e;
  else
    return e.module();
}

/// How a container's lookup error names it: "ModuleDict 'blocks' in Net" when the forward that
/// looked it up belongs to a module that holds it (eager or recording), else its class.
inline std::string describe_container(const Module& container) {
  const tracemod::detail::module_call_state& calls = tracemod::detail::module_calls();
  for (const auto* owners : {&calls.recording, &calls.running})
    for (auto it = owners->rbegin(); it != owners->rend(); ++it)
      for (const auto& [path, m] : (*it)->named_modules())
        if (&m == &container && !path.empty())
          return std::string(container.type_name()) + " '" + path + "' in " + std::string((*it)->type_name());
  return std::string(container.type_name());
}

}  // namespace detail

}  // namespace tracemod::nn
