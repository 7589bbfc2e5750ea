// Reduction building blocks shared by reduce, softmax, pooling and batch_norm: NaN-propagating
// max/min, and reductions of one contiguous row or of the columns of a row-major block.
#pragma once

#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>

namespace tracemod::kernels::detail {

// PyTorch's max/min propagate NaN: once a NaN is seen it wins, whatever comes after.
struct max_op {
  static constexpr float identity = -std::numeric_limits<float>::infinity();
  static float apply(float acc, float v) noexcept { return (v > acc || v != v) ? v : acc; }
  static fbatch apply(const fbatch& acc, const fbatch& v) noexcept {
    return xsimd::select((v > acc) | xsimd::isnan(v), v, acc);
  }
};

struct min_op {
  static constexpr float identity = std::numeric_limits<float>::infinity();
  static float apply(float acc, float v) noexcept { return (v < acc || v != v) ? v : acc; }
  static fbatch apply(const fbatch& acc, const fbatch& v) noexcept {
    return xsimd::select((v < acc) | xsimd::isnan(v), v, acc);
  }
};

template <class Op>
[[nodiscard]] inline float horizontal(const fbatch& b) noexcept {
  alignas(buffer_alignment) std::array<float, simd_width> lanes;
  b.store_aligned(lanes.data());
  float acc = Op::identity;
  for (float v : lanes) acc = Op::apply(acc, v);
  return acc;
}

/// Op-reduction of p[0, len); Op::identity when len == 0.
template <class Op>
[[nodiscard]] inline float row_reduce(const float* p, std::size_t len) noexcept {
  std::size_t i = 0;
  float acc = Op::identity;
  if (len >= simd_width) {
    // Two chains hide the compare/blend latency.
    fbatch a0 = fbatch::load_unaligned(p), a1 = a0;
    for (i = simd_width; i + 2 * simd_width <= len; i += 2 * simd_width) {
      a0 = Op::apply(a0, fbatch::load_unaligned(p + i));
      a1 = Op::apply(a1, fbatch::load_unaligned(p + i + simd_width));
    }
    if (i + simd_width <= len) {
      a0 = Op::apply(a0, fbatch::load_unaligned(p + i));
      i += simd_width;
    }
    acc = horizontal<Op>(Op::apply(a0, a1));
  }
  for (; i < len; ++i) acc = Op::apply(acc, p[i]);
  return acc;
}

// Float partial sums over blocks this long keep each lane's rounding error small; blocks are
// then added in double, so long rows lose no more than a short one.
inline constexpr std::size_t sum_block = 1024;

/// Sum of p[0, len), accumulated blockwise in float SIMD lanes and across blocks in double.
[[nodiscard]] inline double row_sum(const float* p, std::size_t len) noexcept {
  constexpr std::size_t unroll = 4 * simd_width;
  double total = 0;
  std::size_t i = 0;
  const std::size_t body = len - len % unroll;
  while (i < body) {
    const std::size_t end = std::min(body, i + sum_block);
    fbatch a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
    for (; i < end; i += unroll) {
      a0 += fbatch::load_unaligned(p + i);
      a1 += fbatch::load_unaligned(p + i + simd_width);
      a2 += fbatch::load_unaligned(p + i + 2 * simd_width);
      a3 += fbatch::load_unaligned(p + i + 3 * simd_width);
    }
    total += static_cast<double>(xsimd::hadd((a0 + a1) + (a2 + a3)));
  }
  // Fewer than 4 batches left: one batch at a time, then scalars.
  const std::size_t batches = len - len % simd_width;
  if (i < batches) {
    fbatch acc = fbatch::load_unaligned(p + i);
    for (i += simd_width; i < batches; i += simd_width) acc += fbatch::load_unaligned(p + i);
    total += static_cast<double>(xsimd::hadd(acc));
  }
  float tail = 0;
  for (; i < len; ++i) tail += p[i];
  return total + static_cast<double>(tail);
}

/// y[j] = Op-reduction over l of x[l * inner + j], for j < count <= inner; len >= 1.
template <class Op>
inline void column_reduce(const float* x, float* y, std::size_t len, std::size_t inner, std::size_t count) noexcept {
  std::size_t j = 0;
  for (; j + simd_width <= count; j += simd_width) {
    fbatch acc = fbatch::load_unaligned(x + j);
    for (std::size_t l = 1; l < len; ++l) acc = Op::apply(acc, fbatch::load_unaligned(x + l * inner + j));
    acc.store_unaligned(y + j);
  }
  for (; j < count; ++j) {
    float acc = x[j];
    for (std::size_t l = 1; l < len; ++l) acc = Op::apply(acc, x[l * inner + j]);
    y[j] = acc;
  }
}

/// Columns column_sum handles at a time (its accumulators live on the stack).
inline constexpr std::size_t column_sum_chunk = 256;

/// y[j] = (sum over l of x[l * inner + j]) / divisor, for j < count <= inner. A three-level cascade
/// keeps every float accumulator short: rows add into `part` for 32 rows, parts into `mid` for 32
/// parts, mids into double. Columns go in chunks so the accumulators stay on the stack and in L1.
inline void column_sum(const float* x, float* y, std::size_t len, std::size_t inner, std::size_t count,
                       double divisor) noexcept {
  constexpr std::size_t chunk = column_sum_chunk;
  constexpr std::size_t fan_in = 32;
  alignas(buffer_alignment) std::array<float, chunk> part, mid;
  std::array<double, chunk> total;
  const auto add_into = [](float* acc, const float* v, std::size_t width) {
    std::size_t j = 0;
    for (; j + simd_width <= width; j += simd_width)
      (fbatch::load_aligned(acc + j) + fbatch::load_unaligned(v + j)).store_aligned(acc + j);
    for (; j < width; ++j) acc[j] += v[j];
  };
  for (std::size_t j0 = 0; j0 < count; j0 += chunk) {
    const std::size_t width = std::min(chunk, count - j0);
    std::fill_n(total.data(), width, 0.0);
    for (std::size_t l2 = 0; l2 < len; l2 += fan_in * fan_in) {
      std::fill_n(mid.data(), width, 0.0f);
      for (std::size_t l1 = l2; l1 < std::min(len, l2 + fan_in * fan_in); l1 += fan_in) {
        std::fill_n(part.data(), width, 0.0f);
        for (std::size_t l = l1; l < std::min(len, l1 + fan_in); ++l) add_into(part.data(), x + l * inner + j0, width);
        add_into(mid.data(), part.data(), width);
      }
      for (std::size_t j = 0; j < width; ++j) total[j] += static_cast<double>(mid[j]);
    }
    for (std::size_t j = 0; j < width; ++j) y[j0 + j] = static_cast<float>(total[j] / divisor);
  }
}

}  // namespace tracemod::kernels::detail
