// Batch-norm building blocks: per-channel moments of an [N, C, S] tensor and the per-plane
// affine map y = act(x * scale + shift) that both the inference and the training forms end with.
#pragma once

#include <tracemod/kernels/detail/activation.hpp>
#include <tracemod/kernels/detail/reduce_ops.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <cstddef>

namespace tracemod::kernels::detail {

template <activation Act>
inline void affine_plane_with(const float* x, float* y, std::size_t len, float scale, float shift) noexcept {
  const fbatch sb(scale), hb(shift);
  const std::size_t body = len - len % simd_width;
  std::size_t i = 0;
  for (; i < body; i += simd_width)
    activate(Act, xsimd::fma(fbatch::load_unaligned(x + i), sb, hb)).store_unaligned(y + i);
  for (; i < len; ++i) y[i] = activate(Act, x[i] * scale + shift);
}

/// y[i] = act(x[i] * scale + shift) for i < len; y may be x. The activation applies to the
/// rounded affine value, so the result has the bits of the affine map followed by relu / relu6.
inline void affine_plane(const float* x, float* y, std::size_t len, float scale, float shift,
                         activation act = activation::none) noexcept {
  switch (act) {
    case activation::relu: return affine_plane_with<activation::relu>(x, y, len, scale, shift);
    case activation::relu6: return affine_plane_with<activation::relu6>(x, y, len, scale, shift);
    case activation::none: break;
  }
  affine_plane_with<activation::none>(x, y, len, scale, shift);
}

/// Sums of d = p[i] - shift and of d * d over p[0, len), added into sum_d and sum_d2; float SIMD
/// lanes within blocks of sum_block elements, double across blocks.
inline void add_centered_sums(const float* p, std::size_t len, float shift, double& sum_d, double& sum_d2) noexcept {
  const fbatch sh(shift);
  std::size_t i = 0;
  while (len - i >= simd_width) {
    const std::size_t end = i + std::min(sum_block, (len - i) / simd_width * simd_width);
    fbatch s1(0.0f), s2(0.0f);
    for (; i < end; i += simd_width) {
      const fbatch d = fbatch::load_unaligned(p + i) - sh;
      s1 += d;
      s2 = xsimd::fma(d, d, s2);
    }
    sum_d += static_cast<double>(xsimd::hadd(s1));
    sum_d2 += static_cast<double>(xsimd::hadd(s2));
  }
  for (; i < len; ++i) {
    const double d = static_cast<double>(p[i]) - static_cast<double>(shift);
    sum_d += d;
    sum_d2 += d * d;
  }
}

struct moments {
  double mean;
  double var;  ///< biased: divided by the element count
};

/// Mean and biased variance of channel `ch` of an [n, c, s] tensor; n * s > 0.
/// Two passes: the mean, then the sums of d = x - shift and d^2 around the mean rounded to float
/// (the SIMD lanes subtract in float); var = E[d^2] - E[d]^2 holds for any shift, and with the
/// shift this close to the mean it loses no precision.
[[nodiscard]] inline moments channel_moments(const float* x, std::size_t n, std::size_t c, std::size_t s,
                                             std::size_t ch) noexcept {
  const double count = static_cast<double>(n * s);
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += row_sum(x + (i * c + ch) * s, s);
  const double mean = sum / count;
  const auto shift = static_cast<float>(mean);
  double sum_d = 0, sum_d2 = 0;
  for (std::size_t i = 0; i < n; ++i) add_centered_sums(x + (i * c + ch) * s, s, shift, sum_d, sum_d2);
  const double mean_d = sum_d / count;
  return {mean, std::max(0.0, sum_d2 / count - mean_d * mean_d)};
}

}  // namespace tracemod::kernels::detail
