// Batch normalisation of a tensor viewed as [N, C, S]: NCHW with S = H * W, or [N, C] with S = 1.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/bn_kernels.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>
#include <tracemod/kernels/simd.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tracemod::kernels {

/// Inference form: y = (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c], computed as
/// y = x * scale[c] + shift[c] with scale and shift folded once per channel (as PyTorch does).
/// weight and bias may be null (1 and 0). y may alias x. `act` (relu / relu6) is applied as each
/// value is stored, with the bits of the separate activation after the batch norm.
inline void batch_norm_inference(const float* x, float* y, std::size_t n, std::size_t c, std::size_t s,
                                 const float* mean, const float* var, const float* weight, const float* bias,
                                 float eps, activation act = activation::none) {
  std::vector<float> scale(c), shift(c);
  for (std::size_t ch = 0; ch < c; ++ch) {
    const double sc = (weight ? weight[ch] : 1.0) / std::sqrt(static_cast<double>(var[ch]) + eps);
    scale[ch] = static_cast<float>(sc);
    shift[ch] = static_cast<float>((bias ? bias[ch] : 0.0) - mean[ch] * sc);
  }
  const auto signed_size = [](std::size_t v) { return static_cast<std::int64_t>(v); };
  if (s == 1) {
    // [N, C]: each row is one element of every channel, so SIMD runs across channels.
    parallel_for(0, signed_size(n), detail::grain_in_items(detail::grains().plane, signed_size(c)),
                 [&](std::int64_t lo, std::int64_t hi) {
                   for (auto i = static_cast<std::size_t>(lo); i < static_cast<std::size_t>(hi); ++i) {
                     const float* xr = x + i * c;
                     float* yr = y + i * c;
                     std::size_t ch = 0;
                     for (; ch + simd_width <= c; ch += simd_width)
                       detail::activate(act, xsimd::fma(fbatch::load_unaligned(xr + ch),
                                                        fbatch::load_unaligned(scale.data() + ch),
                                                        fbatch::load_unaligned(shift.data() + ch)))
                           .store_unaligned(yr + ch);
                     for (; ch < c; ++ch) yr[ch] = detail::activate(act, xr[ch] * scale[ch] + shift[ch]);
                   }
                 });
    return;
  }
  parallel_for(0, signed_size(n * c), detail::grain_in_items(detail::grains().plane, signed_size(s)),
               [&](std::int64_t lo, std::int64_t hi) {
                 for (auto p = static_cast<std::size_t>(lo); p < static_cast<std::size_t>(hi); ++p)
                   detail::affine_plane(x + p * s, y + p * s, s, scale[p % c], shift[p % c], act);
               });
}

/// Training form: normalises with the batch statistics of each channel (mean and biased
/// variance over N and S), then applies weight and bias (nullable: 1 and 0).
/// If running_mean / running_var are not null they are updated with PyTorch's convention,
///   running = (1 - momentum) * running + momentum * batch_stat,
/// so momentum is the weight of the new batch (PyTorch's default is 0.1; MegEngine's momentum
/// is the weight of the old value instead, i.e. 1 - this one). running_var takes the unbiased
/// variance, var * m / (m - 1) with m = n * s. y may alias x.
/// Throws value_error when m == 1 (PyTorch: "expected more than 1 value per channel when
/// training"). An empty batch (m == 0) writes nothing and leaves the running statistics as they are.
inline void batch_norm_training(const float* x, float* y, std::size_t n, std::size_t c, std::size_t s,
                                const float* weight, const float* bias, float* running_mean, float* running_var,
                                float momentum, float eps) {
  const std::size_t m = n * s;
  if (m == 0 || c == 0) return;
  if (m == 1)
    throw value_error("batch_norm_training: expected more than 1 value per channel when training, got n = " +
                      std::to_string(n) + ", c = " + std::to_string(c) + ", s = " + std::to_string(s));
  const double mom = momentum;
  // Channels split across threads; each channel's statistics are summed whole by one thread.
  const auto channels = [&](std::int64_t lo, std::int64_t hi) {
    for (auto ch = static_cast<std::size_t>(lo); ch < static_cast<std::size_t>(hi); ++ch) {
      const detail::moments st = detail::channel_moments(x, n, c, s, ch);
      const double sc = (weight ? weight[ch] : 1.0) / std::sqrt(st.var + eps);
      const auto scale = static_cast<float>(sc);
      const auto shift = static_cast<float>((bias ? bias[ch] : 0.0) - st.mean * sc);
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t offset = (i * c + ch) * s;
        detail::affine_plane(x + offset, y + offset, s, scale, shift);
      }
      if (running_mean)
        running_mean[ch] = static_cast<float>((1 - mom) * running_mean[ch] + mom * st.mean);
      if (running_var) {
        const double unbiased = st.var * static_cast<double>(m) / static_cast<double>(m - 1);
        running_var[ch] = static_cast<float>((1 - mom) * running_var[ch] + mom * unbiased);
      }
    }
  };
  // Three passes over the channel's m floats.
  parallel_for(0, static_cast<std::int64_t>(c), detail::grain_in_items(detail::grains().plane, 3 * static_cast<std::int64_t>(m)),
               channels);
}

}  // namespace tracemod::kernels
