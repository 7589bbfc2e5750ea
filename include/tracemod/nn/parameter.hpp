// Parameter and Buffer: the two kinds of tensor a module owns. Both are Tensors (so every op accepts
// them eagerly); the type only tells the module system which list a member belongs to, as
// MegEngine's Parameter / non-Parameter tensor attributes and PyTorch's parameters / buffers do.
#pragma once

#include <tracemod/core/tensor.hpp>

#include <utility>

namespace tracemod {

/// A trainable tensor of a module (weights, biases). A default-constructed Parameter is undefined:
/// the module has the attribute but it holds nothing (PyTorch's `bias=None`).
class Parameter : public Tensor {
 public:
  Parameter() = default;
  explicit Parameter(Tensor t) : Tensor(std::move(t)) {}

  /// Rebinds this parameter to another tensor (the kind stays).
  Parameter& operator=(Tensor t) {
    Tensor::operator=(std::move(t));
    return *this;
  }
};

/// Non-trainable state of a module (running statistics, counters).
class Buffer : public Tensor {
 public:
  Buffer() = default;
  explicit Buffer(Tensor t) : Tensor(std::move(t)) {}

  Buffer& operator=(Tensor t) {
    Tensor::operator=(std::move(t));
    return *this;
  }
};

}  // namespace tracemod
