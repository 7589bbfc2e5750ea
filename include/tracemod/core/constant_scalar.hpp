// Compile-time scalar constants: `x * tmod::c<2>`, `x + tmod::c<1, 2>` (= 0.5). They behave as float
// in every mode, and the compile-time tracer sees their exact rational value in the type (so
// `x * c<1>` can be rewritten to `x`, and chains of them fold exactly).
#pragma once

#include <cstdint>
#include <numeric>
#include <type_traits>

namespace tracemod {

/// Num / Den in lowest terms with a positive denominator (see tmod::c).
template <std::int64_t Num, std::int64_t Den>
struct constant_scalar {
  static_assert(Den > 0 && std::gcd(Num, Den) == 1, "use tmod::c<Num, Den>, which normalises the fraction");
  static constexpr std::int64_t num = Num;
  static constexpr std::int64_t den = Den;
  static constexpr float value = static_cast<float>(static_cast<double>(Num) / static_cast<double>(Den));
  constexpr operator float() const noexcept { return value; }  // NOLINT: implicit by design
};

namespace detail {
template <std::int64_t Num, std::int64_t Den>
struct normalized_constant {
  static_assert(Den != 0, "tmod::c<Num, Den>: the denominator must not be zero");
  static constexpr std::int64_t sign = Den < 0 ? -1 : 1;
  static constexpr std::int64_t g = std::gcd(Num, Den) == 0 ? 1 : std::gcd(Num, Den);
  using type = constant_scalar<sign * Num / g, sign * Den / g>;
};
}  // namespace detail

/// The constant Num / Den, normalised so equal values have equal types.
template <std::int64_t Num, std::int64_t Den = 1>
using constant_scalar_t = typename detail::normalized_constant<Num, Den>::type;

template <std::int64_t Num, std::int64_t Den = 1>
inline constexpr constant_scalar_t<Num, Den> c{};

template <class T>
inline constexpr bool is_constant_scalar_v = false;
template <std::int64_t Num, std::int64_t Den>
inline constexpr bool is_constant_scalar_v<constant_scalar<Num, Den>> = true;

}  // namespace tracemod
