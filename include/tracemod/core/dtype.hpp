// Element types a Tensor can hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace tracemod {

/// boolean: one byte per element holding 0 or 1 (C++ `bool`); masks and comparison results.
enum class DType : std::uint8_t { float32, int32, boolean };

[[nodiscard]] constexpr std::size_t itemsize(DType d) noexcept {
  switch (d) {
    case DType::float32: return sizeof(float);
    case DType::int32: return sizeof(std::int32_t);
    case DType::boolean: return sizeof(bool);
  }
  return 0;
}

[[nodiscard]] constexpr std::string_view dtype_name(DType d) noexcept {
  switch (d) {
    case DType::float32: return "float32";
    case DType::int32: return "int32";
    case DType::boolean: return "bool";
  }
  return "?";
}

/// The dtypes by name, as numpy and MegEngine spell them: `x.astype(tmod::int32)`.
inline constexpr DType float32 = DType::float32;
inline constexpr DType int32 = DType::int32;
/// numpy's `np.bool_` (`bool` itself is a keyword).
inline constexpr DType bool_ = DType::boolean;

static_assert(sizeof(bool) == 1, "tracemod stores a bool tensor's elements as one byte each");

template <class T>
inline constexpr bool is_element_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, bool>;

/// The DType that stores C++ type T (float, std::int32_t or bool).
template <class T>
  requires is_element_type_v<T>
inline constexpr DType dtype_of_v = std::is_same_v<T, float>          ? DType::float32
                                    : std::is_same_v<T, std::int32_t> ? DType::int32
                                                                      : DType::boolean;

}  // namespace tracemod
