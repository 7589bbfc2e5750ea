// Overflow-checked size arithmetic: the one place where extents, element counts and byte sizes are
// multiplied and added, so no size wraps around on its way to an allocation or an index.
#pragma once

#include <tracemod/core/error.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace tracemod {

/// The largest tensor buffer tracemod allocates: 2^47 bytes (128 TiB), the user address space of
/// x86-64 and of 48-bit AArch64. A larger size cannot be held by any allocation on those machines,
/// so it is rejected as a shape_error before anything is allocated.
inline constexpr std::int64_t max_tensor_bytes = std::int64_t{1} << 47;

/// a * b, or shape_error "<op>: <what> overflows: a x b".
[[nodiscard]] constexpr std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view op,
                                                 std::string_view what) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    throw shape_error(std::string(op) + ": " + std::string(what) + " overflows: " + std::to_string(a) + " x " +
                      std::to_string(b));
  return r;
}

/// a + b, or shape_error "<op>: <what> overflows: a + b".
[[nodiscard]] constexpr std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view op,
                                                 std::string_view what) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    throw shape_error(std::string(op) + ": " + std::string(what) + " overflows: " + std::to_string(a) + " + " +
                      std::to_string(b));
  return r;
}

/// The product of `n` non-negative extents (0 as soon as one is 0, even if the others overflow
/// together), or shape_error naming `op` and `what`.
[[nodiscard]] constexpr std::int64_t checked_product(const std::int64_t* extents, std::size_t n, std::string_view op,
                                                     std::string_view what) {
  for (std::size_t i = 0; i < n; ++i)
    if (extents[i] == 0) return 0;
  std::int64_t r = 1;
  for (std::size_t i = 0; i < n; ++i) r = checked_mul(r, extents[i], op, what);
  return r;
}

}  // namespace tracemod
