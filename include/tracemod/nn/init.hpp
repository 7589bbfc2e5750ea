// Parameter initialisation (PyTorch's torch.nn.init) from a seedable global generator.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/random.hpp>
#include <tracemod/core/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tracemod {

/// The generator module constructors draw their initial values from (one per program; not
/// thread-safe: construct modules from one thread, or seed per thread before constructing).
[[nodiscard]] inline Generator& default_generator() noexcept {
  static Generator g(0);
  return g;
}

/// Restarts the default generator: the same seed gives the same initial weights.
inline void manual_seed(std::uint64_t seed) noexcept { default_generator() = Generator(seed); }

}  // namespace tracemod

namespace tracemod::nn::init {

/// in_channels x receptive field of a weight (out, in, k...): PyTorch's fan_in. Computed from the
/// extents after the first, so a weight with no output rows still has one (and no division by 0).
[[nodiscard]] inline std::int64_t fan_in(const Tensor& weight) {
  if (weight.ndim() < 2)
    throw value_error("init.fan_in: a weight of shape " + weight.shape().to_string() +
                      " has no fan-in (it needs at least 2 dimensions)");
  // The product of the trailing extents: weight.numel() / size(0) would divide by zero for out = 0.
  return Shape(weight.shape().begin() + 1, weight.shape().end()).numel();
}

inline void uniform_(Tensor& t, double low, double high, Generator& g = default_generator()) {
  if (!(low <= high))
    throw value_error("init.uniform_: low " + std::to_string(low) + " exceeds high " + std::to_string(high));
  for (float& v : t.values<float>()) v = g.uniform(static_cast<float>(low), static_cast<float>(high));
}

inline void constant_(Tensor& t, double value) {
  std::ranges::fill(t.values<float>(), static_cast<float>(value));
}
inline void zeros_(Tensor& t) { constant_(t, 0.0); }
inline void ones_(Tensor& t) { constant_(t, 1.0); }

/// U(-bound, bound) with bound = gain * sqrt(3 / fan_in) and the leaky-ReLU gain sqrt(2 / (1 + a^2)).
/// a = sqrt(5) gives bound = 1 / sqrt(fan_in): PyTorch's default for Linear and Conv weights.
inline void kaiming_uniform_(Tensor& t, double a = 0.0, Generator& g = default_generator()) {
  const auto n = fan_in(t);
  if (n == 0) return;  // an empty weight: nothing to draw
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = gain * std::sqrt(3.0 / static_cast<double>(n));
  uniform_(t, -bound, bound, g);
}

/// PyTorch's default initialisation of a Linear/Conv layer: weight kaiming_uniform_(a = sqrt(5)),
/// bias (if defined) U(-1/sqrt(fan_in), 1/sqrt(fan_in)), or zeros when fan_in is 0 (as PyTorch's
/// bound of 0 gives).
inline void default_layer_init_(Tensor& weight, Tensor& bias, Generator& g = default_generator()) {
  kaiming_uniform_(weight, std::sqrt(5.0), g);
  const auto n = fan_in(weight);
  if (!bias.defined()) return;
  if (n == 0) {
    zeros_(bias);
    return;
  }
  const double bound = 1.0 / std::sqrt(static_cast<double>(n));
  uniform_(bias, -bound, bound, g);
}

}  // namespace tracemod::nn::init
