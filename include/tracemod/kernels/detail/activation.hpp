// relu and relu6 on vectors and on single floats, shared by the elementwise kernels and the epilogues
// of the convolution kernels, so an activation fused into a conv gives the bits of the separate op.
#pragma once

#include <tracemod/kernels/simd.hpp>

#include <cstdint>

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

}  // namespace detail
}  // namespace tracemod::kernels
