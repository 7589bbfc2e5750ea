// A small deterministic random generator: the same seed gives the same numbers on every platform
// (std::normal_distribution is implementation-defined, so it is not used).
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace tracemod {

/// PCG32 (64-bit state, 32-bit output, O'Neill's XSH-RR output function).
class Generator {
 public:
  explicit constexpr Generator(std::uint64_t seed = 0) noexcept : state_(0), inc_((seed << 1u) | 1u) {
    next_u32();
    state_ += 0x853c49e6748fea9bULL ^ seed;
    next_u32();
  }

  constexpr std::uint32_t next_u32() noexcept {
    const std::uint64_t old = state_;
    state_ = old * 6364136223846793005ULL + inc_;
    const auto xorshifted = static_cast<std::uint32_t>(((old >> 18u) ^ old) >> 27u);
    const auto rot = static_cast<std::uint32_t>(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((32u - rot) & 31u));
  }

  /// Uniform in [0, 1) with 24 bits of resolution (exactly representable floats).
  constexpr float uniform() noexcept { return static_cast<float>(next_u32() >> 8) * 0x1p-24f; }
  /// Uniform in [low, high).
  constexpr float uniform(float low, float high) noexcept { return low + (high - low) * uniform(); }

  /// Standard normal (Box-Muller; the second value of each pair is kept for the next call).
  float normal() noexcept {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // 1 - uniform() is in (0, 1], so the log is finite.
    const double u1 = 1.0 - static_cast<double>(uniform());
    const double u2 = static_cast<double>(uniform());
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    spare_ = static_cast<float>(r * std::sin(theta));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(theta));
  }

 private:
  std::uint64_t state_;
  std::uint64_t inc_;
  float spare_ = 0.f;
  bool has_spare_ = false;
};

}  // namespace tracemod
