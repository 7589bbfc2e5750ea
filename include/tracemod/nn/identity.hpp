// Identity: returns its input (a placeholder that keeps a module slot, e.g. after fusing a bn away).
#pragma once

#include <tracemod/nn/reflection.hpp>

namespace tracemod::nn {

class Identity : public Module {
 public:
  Identity() = default;
  TM_BUILTIN_MODULE(Identity)

  [[nodiscard]] Tensor forward(const Tensor& x) const { return x; }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return x; }
};

}  // namespace tracemod::nn
