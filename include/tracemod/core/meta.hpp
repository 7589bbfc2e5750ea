// Small metaprogramming helpers every layer uses.
#pragma once

namespace tracemod::detail {

/// False for every T...: a static_assert on it fails only when the template is instantiated.
template <class...>
inline constexpr bool always_false_v = false;

}  // namespace tracemod::detail
