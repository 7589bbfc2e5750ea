// Which kernel code path a test run exercises: the widest instruction set the compiler targets.
// CI builds the kernel tests for AVX-512 (g++, -march=native), AVX2 + FMA (clang) and SSE2
// (sanitizers); this pins each build to the path it claims to test.
#include <tracemod/kernels/simd.hpp>

#include <doctest/doctest.h>

#include <string_view>

namespace tmod_test_kernels_simd {

namespace k = tracemod::kernels;

TEST_CASE("simd: the kernels use the widest instruction set the compiler targets") {
  const std::string_view arch = k::arch::name();
  INFO("kernels::arch is " << arch << ", " << k::simd_width << " floats per vector");
#if defined(__AVX512F__)
  CHECK(k::simd_width == 16);
  CHECK(arch.starts_with("avx512"));
#elif defined(__AVX2__) && defined(__FMA__)
  CHECK(k::simd_width == 8);
  CHECK(arch == "fma3+avx2");
#elif defined(__AVX__)
  CHECK(k::simd_width == 8);
#else
  CHECK(k::simd_width == 4);
#endif
}

}  // namespace tmod_test_kernels_simd
