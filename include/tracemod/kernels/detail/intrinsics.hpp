// The x86 intrinsics (<immintrin.h>), included once for every kernel: xsimd reaches them through
// kernels/simd.hpp, the int8 GEMM's hand-written loops directly.
#pragma once

// g++ 12 reports -W(maybe-)uninitialized inside its own AVX-512 intrinsics (_mm512_undefined_*),
// reached through xsimd's exp/tanh and through _mm512 conversions. The warning's location is the
// intrinsic header, so silencing it around this include silences only those false positives, not
// warnings in our code (nor in xsimd's, which includes the header again behind its guard).
#if defined(__x86_64__) || defined(__i386__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
