// The cost of one call of an op, as a function of its operand shapes: the arithmetic it does and the
// bytes it reads and writes. An op states its arithmetic beside its definition,
//   static op_cost cost(const params&, const Shape& out, <operand shapes as infer_shape takes them>)
// and the registry generates the entry's cost function from it (functional/registry.hpp). Counting
// conventions:
//   macs    multiply-accumulates of the contracting ops (conv, linear, matmul): the arithmetic of the
//           direct algorithm, out elements x reduction length, whichever kernel runs (GEMM, Winograd);
//           this is the figure papers publish as "FLOPs" (ResNet-18: 1.82 G)
//   flops   every arithmetic operation, a multiply-add counting once: macs plus bias adds, one per
//           output element of an elementwise op, one per window element of pooling, and so on
//   bytes   tensor operands read once and the output written once, float32 (4 bytes an element, the
//           dtype the kernels compute in); views and copies (reshape, flatten) count as copies
// An op without a cost member does no arithmetic beyond one operation per output element if it is
// elementwise, none otherwise (shape ops).
#pragma once

#include <tracemod/core/shape.hpp>

#include <cstdint>

namespace tracemod::functional {

struct op_cost {
  std::int64_t macs = 0;
  std::int64_t flops = 0;
  std::int64_t bytes_read = 0;
  std::int64_t bytes_written = 0;

  [[nodiscard]] constexpr std::int64_t bytes() const noexcept { return bytes_read + bytes_written; }
  constexpr op_cost& operator+=(const op_cost& o) noexcept {
    macs += o.macs;
    flops += o.flops;
    bytes_read += o.bytes_read;
    bytes_written += o.bytes_written;
    return *this;
  }
  friend constexpr op_cost operator+(op_cost a, const op_cost& b) noexcept { return a += b; }
  friend constexpr bool operator==(const op_cost&, const op_cost&) = default;
};

/// Bytes of a float32 tensor of this shape.
constexpr std::int64_t float_bytes(const Shape& s) { return s.numel() * 4; }

/// The cost of a contracting op: `macs` multiply-accumulates, plus `extra` other operations.
constexpr op_cost mac_cost(std::int64_t macs, std::int64_t extra = 0) { return {macs, macs + extra, 0, 0}; }

/// The cost of an op doing `flops` operations and no multiply-accumulates.
constexpr op_cost flop_cost(std::int64_t flops) { return {0, flops, 0, 0}; }

}  // namespace tracemod::functional
