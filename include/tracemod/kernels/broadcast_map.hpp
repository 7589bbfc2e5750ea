// A scalar elementwise loop over numpy-broadcast operands of any element types: y = f(a, b, ...),
// each operand read through the library's one broadcast planner (detail/elementwise_broadcast.hpp).
// For the ops whose elements are not float lanes (comparisons, where, logical ops, broadcast_to),
// which move or compare bytes rather than compute.
#pragma once

#include <tracemod/core/shape.hpp>
#include <tracemod/kernels/detail/elementwise_broadcast.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

namespace tracemod::kernels {

/// y[i] = f(in_0[j_0], in_1[j_1], ...) over the output `out`, where in_k (of shape shapes[k])
/// broadcasts to `out`; every shape must broadcast to `out` (the caller checked).
template <class Out, class F, class... In>
void broadcast_map(const Shape& out, Out* y, const F& f, const std::array<Shape, sizeof...(In)>& shapes,
                   const In*... in) {
  constexpr std::size_t n = sizeof...(In);
  if (out.numel() == 0) return;
  const auto plan = detail::plan_broadcast_rows<n>(std::span<const Shape>(shapes), out);
  const std::tuple<const In*...> ptr{in...};
  std::array<std::int64_t, n> step{};
  for (std::size_t k = 0; k < n; ++k) step[k] = plan.row_stride(k);
  detail::for_each_broadcast_row(plan, 0, plan.rows, [&](const std::int64_t* offset, std::int64_t at) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      for (std::int64_t i = 0; i < plan.row_length; ++i) y[at + i] = f(std::get<K>(ptr)[offset[K] + i * step[K]]...);
    }(std::make_index_sequence<n>{});
  });
}

}  // namespace tracemod::kernels
