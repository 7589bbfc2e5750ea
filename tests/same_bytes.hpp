// Bit equality of two tensors of the same shape and dtype (float32, int32 or bool), for the tests
// whose reference must be met exactly.
#pragma once

#include <tracemod/core/tensor.hpp>

#include <cstring>

namespace tmod_test {

inline bool same_bytes(const tracemod::Tensor& a, const tracemod::Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const auto bytes = [](const tracemod::Tensor& t) -> const void* {
    return t.dtype() == tracemod::bool_ ? static_cast<const void*>(t.data<bool>()) : t.data<float>();
  };
  return std::memcmp(bytes(a), bytes(b), a.nbytes()) == 0;
}

}  // namespace tmod_test
