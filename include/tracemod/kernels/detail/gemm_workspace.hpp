// Scratch memory for packed panels: aligned, owned by the calling thread, grown on demand and
// reused across calls so steady-state GEMMs and convolutions never allocate.
#pragma once

#include <tracemod/kernels/simd.hpp>

#include <array>
#include <cstddef>
#include <memory>
#include <new>

namespace tracemod::kernels::detail {

/// Independent scratch areas a single kernel call may hold at the same time.
enum class scratch_slot : std::size_t {
  gemm_b_panels,
  gemm_a_panels,
  conv_input,
  conv_filters,
  winograd_filters,
  winograd_input,
  winograd_products,
  count
};

/// `floats` floats of `buffer_alignment`-aligned scratch; contents are unspecified. Valid until the
/// next request for the same slot on the same thread.
inline float* scratch(scratch_slot slot, std::size_t floats) {
  struct aligned_delete {
    void operator()(float* p) const noexcept { ::operator delete(p, std::align_val_t{buffer_alignment}); }
  };
  struct buffer {
    std::unique_ptr<float, aligned_delete> data;
    std::size_t size = 0;
  };
  thread_local std::array<buffer, static_cast<std::size_t>(scratch_slot::count)> buffers;

  auto& b = buffers[static_cast<std::size_t>(slot)];
  if (b.size < floats) {
    b.data.reset();  // release first: the old contents are not kept, so never hold both
    b.size = 0;
    b.data.reset(static_cast<float*>(::operator new(floats * sizeof(float), std::align_val_t{buffer_alignment})));
    b.size = floats;
  }
  return b.data.get();
}

}  // namespace tracemod::kernels::detail
