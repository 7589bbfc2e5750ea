// Reduces a numpy-broadcast op (binary, or N-ary for the fused elementwise op) to the fewest nested
// loops over contiguous rows.
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

/// Loops over a contiguous output, outermost first. Output dims of extent 1 are dropped and
/// adjacent dims that are contiguous in both operands merged, so `x[N,C,H,W] + bias[C,1,1]` becomes
/// N*C rows of H*W elements. An operand's stride is 0 along the dims it is broadcast over; in the
/// innermost dim it is 0 or 1, and never 0 for both.
struct broadcast_loops {
  using per_dim = std::array<std::int64_t, Shape::max_rank>;
  std::size_t rank = 0;
  per_dim extent{};
  per_dim stride_a{};
  per_dim stride_b{};
};

/// Element strides of `s`, right-aligned into the output rank `rank`, 0 where `s` is broadcast.
[[nodiscard]] inline broadcast_loops::per_dim broadcast_strides(const Shape& s, std::size_t rank) noexcept {
  const Strides own = contiguous_strides(s);
  const std::size_t offset = rank - s.rank();
  broadcast_loops::per_dim out{};
  for (std::size_t d = 0; d < s.rank(); ++d) out[offset + d] = s[d] == 1 ? 0 : own[d];
  return out;
}

/// Requires sy == broadcast_shapes(sa, sb) and sy.numel() > 0.
[[nodiscard]] inline broadcast_loops plan_broadcast(const Shape& sa, const Shape& sb, const Shape& sy) noexcept {
  const auto stride_a = broadcast_strides(sa, sy.rank());
  const auto stride_b = broadcast_strides(sb, sy.rank());
  broadcast_loops loops;
  for (std::size_t d = 0; d < sy.rank(); ++d) {
    if (sy[d] == 1) continue;
    std::size_t at = loops.rank;
    if (at > 0 && loops.stride_a[at - 1] == stride_a[d] * sy[d] && loops.stride_b[at - 1] == stride_b[d] * sy[d]) {
      --at;  // contiguous with the previous loop in both operands: one loop
      loops.extent[at] *= sy[d];
    } else {
      loops.extent[at] = sy[d];
      ++loops.rank;
    }
    loops.stride_a[at] = stride_a[d];
    loops.stride_b[at] = stride_b[d];
  }
  if (loops.rank == 0) {  // a single element
    loops.extent[0] = loops.stride_a[0] = loops.stride_b[0] = 1;
    loops.rank = 1;
  }
  return loops;
}

/// Number of innermost rows of the loops.
[[nodiscard]] inline std::int64_t row_count(const broadcast_loops& loops) noexcept {
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < loops.rank; ++d) rows *= loops.extent[d];
  return rows;
}

/// Calls row(offset_a, offset_b, offset_y) for the innermost rows [first, last), in output order.
template <class Row>
void for_each_row(const broadcast_loops& loops, std::int64_t first, std::int64_t last, const Row& row) {
  const std::size_t outer = loops.rank - 1;
  broadcast_loops::per_dim index{};
  std::int64_t offset_a = 0, offset_b = 0;
  for (std::size_t d = outer, rest = static_cast<std::size_t>(first); d-- > 0;) {  // the odometer at `first`
    index[d] = static_cast<std::int64_t>(rest % static_cast<std::size_t>(loops.extent[d]));
    rest /= static_cast<std::size_t>(loops.extent[d]);
    offset_a += index[d] * loops.stride_a[d];
    offset_b += index[d] * loops.stride_b[d];
  }
  for (std::int64_t r = first; r < last; ++r) {
    row(offset_a, offset_b, r * loops.extent[outer]);
    for (std::size_t d = outer; d-- > 0;) {  // odometer step over the outer dims
      offset_a += loops.stride_a[d];
      offset_b += loops.stride_b[d];
      if (++index[d] < loops.extent[d]) break;
      offset_a -= loops.stride_a[d] * loops.extent[d];
      offset_b -= loops.stride_b[d] * loops.extent[d];
      index[d] = 0;
    }
  }
}

/// The broadcasting of any number of operands against an output, as rows: the output's dims of
/// extent 1 dropped and adjacent dims merged where every operand allows it (plan_broadcast's rule,
/// for N operands), so that each operand is, along a row, contiguous (stride 1) or one repeated
/// value (stride 0). The planner of the fused elementwise op.
struct broadcast_rows {
  static constexpr std::size_t max_operands = 8;
  using per_dim = std::array<std::int64_t, Shape::max_rank>;
  std::size_t rank = 0, operands = 0;
  per_dim extent{};
  std::array<per_dim, max_operands> stride{};
  std::int64_t rows = 1, row_length = 1;

  /// Operand k's stride along a row: 0 or 1.
  [[nodiscard]] std::int64_t row_stride(std::size_t k) const noexcept { return stride[k][rank - 1]; }
};

/// Requires shapes.size() <= max_operands, each broadcasting to `out`, and out.numel() > 0.
[[nodiscard]] inline broadcast_rows plan_broadcast_rows(std::span<const Shape> shapes, const Shape& out) noexcept {
  broadcast_rows plan;
  plan.operands = shapes.size();
  std::array<broadcast_loops::per_dim, broadcast_rows::max_operands> full{};
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
template <class Row>
void for_each_broadcast_row(const broadcast_rows& plan, std::int64_t first, std::int64_t last, const Row& row) {
  const std::size_t outer = plan.rank - 1;
  broadcast_loops::per_dim index{};
  std::array<std::int64_t, broadcast_rows::max_operands> offset{};
  for (std::size_t d = outer, rest = static_cast<std::size_t>(first); d-- > 0;) {  // the odometer at `first`
    index[d] = static_cast<std::int64_t>(rest % static_cast<std::size_t>(plan.extent[d]));
    rest /= static_cast<std::size_t>(plan.extent[d]);
    for (std::size_t k = 0; k < plan.operands; ++k) offset[k] += index[d] * plan.stride[k][d];
  }
  for (std::int64_t r = first; r < last; ++r) {
    row(offset.data(), r * plan.row_length);
    for (std::size_t d = outer; d-- > 0;) {  // odometer step over the outer dims
      for (std::size_t k = 0; k < plan.operands; ++k) offset[k] += plan.stride[k][d];
      if (++index[d] < plan.extent[d]) break;
      for (std::size_t k = 0; k < plan.operands; ++k) offset[k] -= plan.stride[k][d] * plan.extent[d];
      index[d] = 0;
    }
  }
}

}  // namespace tracemod::kernels::detail
