// The SIMD configuration every kernel shares. The instruction set is whatever the compiler
// targets (-march is set once, by the CMake target tracemod::native); nothing here selects it.
#pragma once

#include <tracemod/kernels/detail/intrinsics.hpp>

#include <xsimd/xsimd.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tracemod::kernels {

using arch = xsimd::default_arch;
using fbatch = xsimd::batch<float, arch>;
inline constexpr std::size_t simd_width = fbatch::size;
/// Lane indices of a compile-time swizzle of an fbatch (xsimd::make_batch_constant<lane_index, G>).
using lane_index = xsimd::batch<std::uint32_t, arch>;
/// Alignment of every tensor buffer; a multiple of any vector width we target.
inline constexpr std::size_t buffer_alignment = 64;
/// Floats on buffer_alignment, for data a kernel keeps and reads with aligned loads (packed panels).
using aligned_floats = std::vector<float, xsimd::aligned_allocator<float, buffer_alignment>>;

}  // namespace tracemod::kernels
