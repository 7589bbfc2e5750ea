// A user module class for tmod::register_as_builtin tests (each test executable registers it once):
// OpaqueScale computes -x * s; UsesOpaque calls it after a convolution.
#pragma once

#include <tracemod/core.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn.hpp>

namespace opaque_test {

namespace tmod = tracemod;

struct OpaqueScale : tmod::Module {
  tmod::Parameter s{tmod::tensor({3.f})};
  TM_MODULE(OpaqueScale, s)
  auto forward(const auto& x) const { return tracemod::functional::neg(x) * s; }
};

struct UsesOpaque : tmod::Module {
  tracemod::nn::Conv2d conv{3, 4, 3, {.padding = 1}};
  OpaqueScale op;
  TM_MODULE(UsesOpaque, conv, op)
  auto forward(const auto& x) const { return op(conv(x)); }
};

}  // namespace opaque_test
