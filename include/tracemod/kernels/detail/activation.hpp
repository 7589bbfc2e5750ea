// relu and relu6 on vectors and on single floats, shared by the elementwise kernels and the epilogues
// of the convolution kernels, so an activation fused into a conv gives the bits of the separate op.
#pragma once

#include <tracemod/kernels/simd.hpp>

#include <cstdint>
#include <type_traits>

namespace tracemod::kernels {

/// The activation a convolution applies to its output (MegEngine's nonlinear_mode).
enum class activation : std::uint8_t { none, relu, relu6 };

namespace detail {

// NaN <= 0 and NaN > 6 are false: NaN passes through, as in PyTorch; -0 becomes +0.
inline fbatch relu(const fbatch& x) noexcept { return xsimd::select(x <= fbatch(0.0f), fbatch(0.0f), x); }
inline fbatch relu6(const fbatch& x) noexcept {
  const fbatch six(6.0f);
  return xsimd::select(x <= fbatch(0.0f), fbatch(0.0f), xsimd::select(x > six, six, x));
}
inline float relu(float x) noexcept { return x <= 0.0f ? 0.0f : x; }
inline float relu6(float x) noexcept { return x <= 0.0f ? 0.0f : x > 6.0f ? 6.0f : x; }

template <class T>
inline T activate(activation a, const T& x) noexcept {
  switch (a) {
    case activation::relu: return relu(x);
    case activation::relu6: return relu6(x);
    case activation::none: break;
  }
  return x;
}

/// y[q * inc] = act(y[q * inc] + residual[q * inc]) for q < count (a null residual adds nothing): a
/// conv epilogue over values already stored, with the bits of the separate add and activation
/// kernels. A contiguous run (inc 1) goes by vectors, its tail running the same float operations one
/// at a time; each case is its own loop, so none tests per element.
inline void finish_run(float* y, std::int64_t count, std::int64_t inc, const float* residual,
                       activation act) noexcept {
  const auto run = [&](auto with_residual, auto f) {
    constexpr auto w = static_cast<std::int64_t>(simd_width);
    std::int64_t q = 0;
    if (inc == 1) {
      for (; q + w <= count; q += w) {
        fbatch x = fbatch::load_unaligned(y + q);
        if constexpr (with_residual) x = x + fbatch::load_unaligned(residual + q);
        f(x).store_unaligned(y + q);
      }
    }
    for (; q < count; ++q) {
      float x = y[q * inc];
      if constexpr (with_residual) x = x + residual[q * inc];
      y[q * inc] = f(x);
    }
  };
  const auto with = [&](auto f) {
    if (residual != nullptr)
      run(std::true_type{}, f);
    else
      run(std::false_type{}, f);
  };
  switch (act) {
    case activation::relu: with([](const auto& x) { return relu(x); }); return;
    case activation::relu6: with([](const auto& x) { return relu6(x); }); return;
    case activation::none: with([](const auto& x) { return x; }); return;
  }
}

}  // namespace detail
}  // namespace tracemod::kernels
