// Transcendental element functions on fbatch that hold over the whole float range.
#pragma once

#include <tracemod/kernels/simd.hpp>

namespace tracemod::kernels::detail {

/// exp(x) from the first subnormal to the overflow threshold. xsimd 8.1's exp returns inf from
/// x = 88.376 on (the true overflow is at 88.723) and flushes results below FLT_MIN to 0. Where
/// |x| > 87 we square exp(x/2) instead: halving is exact and squaring adds about one ulp.
inline fbatch exp_full_range(const fbatch& x) noexcept {
  const fbatch direct = xsimd::exp(x);
  const auto outside = xsimd::abs(x) > fbatch(87.0f);
  if (xsimd::none(outside)) return direct;
  const fbatch half = xsimd::exp(x * fbatch(0.5f));
  return xsimd::select(outside, half * half, direct);
}

/// 1/(1+exp(-x)) for x >= 0 and exp(x)/(1+exp(x)) for x < 0. exp only ever sees -|x|, so it cannot
/// overflow (no inf/inf = NaN) and tiny results for very negative x keep full precision.
inline fbatch sigmoid(const fbatch& x) noexcept {
  const fbatch e = exp_full_range(-xsimd::abs(x));
  const fbatch r = fbatch(1.0f) / (fbatch(1.0f) + e);
  return xsimd::select(x < fbatch(0.0f), e * r, r);
}

}  // namespace tracemod::kernels::detail
