// Element types a Tensor can hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace tracemod {

/// boolean: one byte per element holding 0 or 1 (C++ `bool`); masks and comparison results.
/// uint8 / int8: the stored integers of quantized tensors (std::uint8_t, std::int8_t); their scale
/// and zero point travel beside them (the quantized ops' arguments, QParams), not in the dtype.
enum class DType : std::uint8_t { float32, int32, boolean, uint8, int8 };

[[nodiscard]] constexpr std::size_t itemsize(DType d) noexcept {
  switch (d) {
    case DType::float32: return sizeof(float);
    case DType::int32: return sizeof(std::int32_t);
    case DType::boolean: return sizeof(bool);
    case DType::uint8: return sizeof(std::uint8_t);
    case DType::int8: return sizeof(std::int8_t);
  }
  return 0;
}

[[nodiscard]] constexpr std::string_view dtype_name(DType d) noexcept {
  switch (d) {
    case DType::float32: return "float32";
    case DType::int32: return "int32";
    case DType::boolean: return "bool";
    case DType::uint8: return "uint8";
    case DType::int8: return "int8";
  }
  return "?";
}

/// The dtypes by name, as numpy and MegEngine spell them: `x.astype(tmod::int32)`.
inline constexpr DType float32 = DType::float32;
inline constexpr DType int32 = DType::int32;
/// numpy's `np.bool_` (`bool` itself is a keyword).
inline constexpr DType bool_ = DType::boolean;
inline constexpr DType uint8 = DType::uint8;
inline constexpr DType int8 = DType::int8;

/// Every dtype, in enum order: loaders and dispatchers walk it instead of listing the values.
inline constexpr DType all_dtypes[] = {DType::float32, DType::int32, DType::boolean, DType::uint8, DType::int8};

static_assert(sizeof(bool) == 1, "tracemod stores a bool tensor's elements as one byte each");

template <class T>
inline constexpr bool is_element_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, bool> ||
    std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int8_t>;

/// The DType that stores C++ type T (float, std::int32_t, bool, std::uint8_t or std::int8_t).
template <class T>
  requires is_element_type_v<T>
inline constexpr DType dtype_of_v = std::is_same_v<T, float>          ? DType::float32
                                    : std::is_same_v<T, std::int32_t> ? DType::int32
                                    : std::is_same_v<T, bool>         ? DType::boolean
                                    : std::is_same_v<T, std::uint8_t> ? DType::uint8
                                                                      : DType::int8;

/// Calls f(T{}) with the C++ element type of `d`.
template <class F>
constexpr decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::int32: return f(std::int32_t{});
    case DType::boolean: return f(bool{});
    case DType::uint8: return f(std::uint8_t{});
    case DType::int8: return f(std::int8_t{});
    case DType::float32: break;
  }
  return f(float{});
}

}  // namespace tracemod
