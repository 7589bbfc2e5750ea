// The two layouts of softmax: along a contiguous row, and across the columns of a [len, inner] block.
#pragma once

#include <tracemod/kernels/detail/reduce_ops.hpp>
#include <tracemod/kernels/simd.hpp>

#include <cmath>
#include <cstddef>
#include <type_traits>

namespace tracemod::kernels::detail {

/// Softmax of the contiguous row x[0, len) into y (y may be x). Subtracting the row max keeps
/// every exp() in [0, 1], so large inputs cannot overflow.
inline void softmax_row(const float* x, float* y, std::size_t len) noexcept {
  const float m = row_reduce<max_op>(x, len);
  const fbatch mb(m);
  fbatch acc(0.0f);
  std::size_t i = 0;
  for (; i + simd_width <= len; i += simd_width) {
    const fbatch e = xsimd::exp(fbatch::load_unaligned(x + i) - mb);
    e.store_unaligned(y + i);
    acc += e;
  }
  float sum = xsimd::hadd(acc);
  for (; i < len; ++i) {
    y[i] = std::exp(x[i] - m);
    sum += y[i];
  }
  const float inv = 1.0f / sum;
  const fbatch invb(inv);
  i = 0;
  for (; i + simd_width <= len; i += simd_width) (fbatch::load_unaligned(y + i) * invb).store_unaligned(y + i);
  for (; i < len; ++i) y[i] *= inv;
}

/// Softmax down the columns starting at x of a [len, inner] block: simd_width adjacent columns
/// when V is fbatch, one when V is float; len >= 1. y may be x.
template <class V>
inline void softmax_columns(const float* x, float* y, std::size_t len, std::size_t inner) noexcept {
  const auto load = [](const float* p) {
    if constexpr (std::is_same_v<V, float>) return *p;
    else return V::load_unaligned(p);
  };
  const auto store = [](float* p, const V& v) {
    if constexpr (std::is_same_v<V, float>) *p = v;
    else v.store_unaligned(p);
  };
  using std::exp;
  using xsimd::exp;
  V m = load(x);
  for (std::size_t l = 1; l < len; ++l) m = max_op::apply(m, load(x + l * inner));
  V sum(0.0f);
  for (std::size_t l = 0; l < len; ++l) {
    const V e = exp(load(x + l * inner) - m);
    store(y + l * inner, e);
    sum += e;
  }
  const V inv = V(1.0f) / sum;
  for (std::size_t l = 0; l < len; ++l) store(y + l * inner, load(y + l * inner) * inv);
}

/// Softmax along the middle axis of the first `count` columns of a [len, inner] block, inner > 1;
/// SIMD across columns.
inline void softmax_block(const float* x, float* y, std::size_t len, std::size_t inner, std::size_t count) noexcept {
  std::size_t j = 0;
  for (; j + simd_width <= count; j += simd_width) softmax_columns<fbatch>(x + j, y + j, len, inner);
  for (; j < count; ++j) softmax_columns<float>(x + j, y + j, len, inner);
}

}  // namespace tracemod::kernels::detail
