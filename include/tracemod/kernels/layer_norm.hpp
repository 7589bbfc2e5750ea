// The row normalisation of layer_norm and group_norm: each row of a tensor viewed as
// [rows, channels, inner] by its own mean and biased variance, then a per-channel scale and shift.
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>

#include <cmath>
#include <cstdint>

namespace tracemod::kernels {

namespace detail {

/// The lanes of the statistics' sums: independent chains, so the adds overlap and vectorise
/// without reassociating (the order is fixed, and so are the bits).
inline constexpr std::int64_t moment_lanes = 8;

/// The mean and 1 / sqrt(biased variance + eps) of x[0, len), summed in double in two passes.
inline void row_moments(const float* x, std::int64_t len, double eps, float& mean_out, float& rstd_out) {
  constexpr std::int64_t lanes = moment_lanes;
  double acc[lanes] = {};
  std::int64_t i = 0;
  for (; i + lanes <= len; i += lanes)
    for (std::int64_t j = 0; j < lanes; ++j) acc[j] += static_cast<double>(x[i + j]);
  for (std::int64_t j = 0; i < len; ++i, ++j) acc[j] += static_cast<double>(x[i]);
  double sum = 0;
  for (double a : acc) sum += a;
  const double mean = sum / static_cast<double>(len);
  double sq[lanes] = {};
  for (i = 0; i + lanes <= len; i += lanes)
    for (std::int64_t j = 0; j < lanes; ++j) {
      const double d = static_cast<double>(x[i + j]) - mean;
      sq[j] += d * d;
    }
  for (std::int64_t j = 0; i < len; ++i, ++j) {
    const double d = static_cast<double>(x[i]) - mean;
    sq[j] += d * d;
  }
  double var = 0;
  for (double a : sq) var += a;
  mean_out = static_cast<float>(mean);
  rstd_out = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(len) + eps));
}

/// y = (x - m) * r * w + b over n elements, w and b per element (either null: 1 and 0).
inline void normalize_affine(const float* x, float* y, std::int64_t n, float m, float r, const float* w, const float* b) {
  if (w != nullptr && b != nullptr) {
    for (std::int64_t k = 0; k < n; ++k) y[k] = (x[k] - m) * r * w[k] + b[k];
  } else if (w != nullptr) {
    for (std::int64_t k = 0; k < n; ++k) y[k] = (x[k] - m) * r * w[k];
  } else if (b != nullptr) {
    for (std::int64_t k = 0; k < n; ++k) y[k] = (x[k] - m) * r + b[k];
  } else {
    for (std::int64_t k = 0; k < n; ++k) y[k] = (x[k] - m) * r;
  }
}

}  // namespace detail

/// Normalises x viewed as [rows, channels, inner]: each row by the mean and biased variance of its
/// channels * inner elements (summed in double, two passes), then y = (x - mean) * rstd * w + b with
/// w and b (nullable: 1 and 0) indexed by channel (r % groups) * channels + c. layer_norm is
/// groups = 1, inner = 1; group_norm is rows = N * G, channels = C / G, inner = H * W, groups = G.
/// Rows split across threads, each row computed whole by one thread: the same bits at any count.
inline void normalize_rows(const float* x, float* y, std::int64_t rows, std::int64_t channels, std::int64_t inner,
                           std::int64_t groups, const float* weight, const float* bias, double eps) {
  const std::int64_t len = channels * inner;
  if (rows == 0 || len == 0) return;
  const auto row = [&](std::int64_t r) {
    const float* xr = x + r * len;
    float* yr = y + r * len;
    float m = 0, rstd = 0;
    detail::row_moments(xr, len, eps, m, rstd);
    const std::int64_t base = (r % groups) * channels;
    const float* w = weight ? weight + base : nullptr;
    const float* b = bias ? bias + base : nullptr;
    if (inner == 1) return detail::normalize_affine(xr, yr, len, m, rstd, w, b);
    for (std::int64_t c = 0; c < channels; ++c) {
      // one channel: its weight and bias fold into a scale and shift of the normalised value
      const float scale = w ? w[c] : 1.f, shift = b ? b[c] : 0.f;
      const float* xc = xr + c * inner;
      float* yc = yr + c * inner;
      for (std::int64_t k = 0; k < inner; ++k) yc[k] = (xc[k] - m) * rstd * scale + shift;
    }
  };
  parallel_for(0, rows, detail::grain_in_items(detail::grains().plane, 3 * len), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) row(r);
  });
}

}  // namespace tracemod::kernels
