// Reduces a numpy-broadcast op (binary, N-ary for the fused elementwise op, or a typed graph's fused
// subtree) to the fewest nested loops over contiguous rows.
#pragma once

#include <tracemod/core/shape.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace tracemod::kernels::detail {

/// The op's `name` for error messages, if it has one.
template <class Op>
[[nodiscard]] constexpr std::string_view op_name() noexcept {
  if constexpr (requires { std::string_view(Op::name); })
    return Op::name;
  else
    return "binary_broadcast";
}

/// The broadcasting of any number of operands against a contiguous output, as rows: the output's
/// dims of extent 1 dropped and adjacent dims merged where they are contiguous in every operand, so
/// that `x[N,C,H,W] + bias[C,1,1]` becomes N*C rows of H*W elements. An operand's stride is 0 along
/// the dims it is broadcast over; along a row it is 1 (contiguous) or 0 (one repeated value). The
/// one planner of the binary broadcasting kernels, the fused elementwise op and the typed graph's
/// fused evaluator; `MaxOperands` bounds the operands.
template <std::size_t MaxOperands>
struct broadcast_rows_of {
  static constexpr std::size_t max_operands = MaxOperands;
  using per_dim = std::array<std::int64_t, Shape::max_rank>;
  std::size_t rank = 0, operands = 0;
  per_dim extent{};
  std::array<per_dim, MaxOperands> stride{};
  std::int64_t rows = 1, row_length = 1;

  /// Operand k's stride along a row: 0 or 1.
  [[nodiscard]] std::int64_t row_stride(std::size_t k) const noexcept { return stride[k][rank - 1]; }
};
using broadcast_rows = broadcast_rows_of<8>;

/// Element strides of `s`, right-aligned into the output rank `rank`, 0 where `s` is broadcast.
[[nodiscard]] inline std::array<std::int64_t, Shape::max_rank> broadcast_strides(const Shape& s,
                                                                                 std::size_t rank) noexcept {
  const Strides own = contiguous_strides(s);
  const std::size_t offset = rank - s.rank();
  std::array<std::int64_t, Shape::max_rank> out{};
  for (std::size_t d = 0; d < s.rank(); ++d) out[offset + d] = s[d] == 1 ? 0 : own[d];
  return out;
}

/// Requires shapes.size() <= MaxOperands, each broadcasting to `out`, and out.numel() > 0.
template <std::size_t MaxOperands = broadcast_rows::max_operands>
[[nodiscard]] broadcast_rows_of<MaxOperands> plan_broadcast_rows(std::span<const Shape> shapes,
                                                                 const Shape& out) noexcept {
  broadcast_rows_of<MaxOperands> plan;
  plan.operands = shapes.size();
  std::array<std::array<std::int64_t, Shape::max_rank>, MaxOperands> full{};
  for (std::size_t k = 0; k < shapes.size(); ++k) full[k] = broadcast_strides(shapes[k], out.rank());
  for (std::size_t d = 0; d < out.rank(); ++d) {
    if (out[d] == 1) continue;
    std::size_t at = plan.rank;
    bool merge = at > 0;
    for (std::size_t k = 0; merge && k < shapes.size(); ++k) merge = plan.stride[k][at - 1] == full[k][d] * out[d];
    if (merge) {
      --at;
      plan.extent[at] *= out[d];
    } else {
      plan.extent[at] = out[d];
      ++plan.rank;
    }
    for (std::size_t k = 0; k < shapes.size(); ++k) plan.stride[k][at] = full[k][d];
  }
  if (plan.rank == 0) {  // a single element
    plan.extent[0] = 1;
    for (std::size_t k = 0; k < shapes.size(); ++k) plan.stride[k][0] = 1;
    plan.rank = 1;
  }
  plan.row_length = plan.extent[plan.rank - 1];
  for (std::size_t d = 0; d + 1 < plan.rank; ++d) plan.rows *= plan.extent[d];
  return plan;
}

/// Calls row(offsets, offset_y) for the rows [first, last), in output order, with offsets[k] where
/// operand k's row starts.
template <std::size_t MaxOperands, class Row>
void for_each_broadcast_row(const broadcast_rows_of<MaxOperands>& plan, std::int64_t first, std::int64_t last,
                            const Row& row) {
  const std::size_t outer = plan.rank - 1;
  std::array<std::int64_t, Shape::max_rank> index{};
  std::array<std::int64_t, MaxOperands == 0 ? 1 : MaxOperands> offset{};
  for (std::size_t d = outer, rest = static_cast<std::size_t>(first); d-- > 0;) {  // the odometer at `first`
    index[d] = static_cast<std::int64_t>(rest % static_cast<std::size_t>(plan.extent[d]));
    rest /= static_cast<std::size_t>(plan.extent[d]);
    for (std::size_t k = 0; k < plan.operands; ++k) offset[k] += index[d] * plan.stride[k][d];
  }
  for (std::int64_t r = first; r < last; ++r) {
    row(static_cast<const std::int64_t*>(offset.data()), r * plan.row_length);
    for (std::size_t d = outer; d-- > 0;) {  // odometer step over the outer dims
      for (std::size_t k = 0; k < plan.operands; ++k) offset[k] += plan.stride[k][d];
      if (++index[d] < plan.extent[d]) break;
      for (std::size_t k = 0; k < plan.operands; ++k) offset[k] -= plan.stride[k][d] * plan.extent[d];
      index[d] = 0;
    }
  }
}

}  // namespace tracemod::kernels::detail
