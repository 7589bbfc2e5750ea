// A chain of n additions of a scalar (y = x + 1 + 1 + ...): a graph whose length is a parameter, for
// the tests and the benchmark of how passes scale with the number of exprs.
#pragma once

#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/nn/reflection.hpp>

namespace models {

struct AddChain : tracemod::Module {
  TM_MODULE(AddChain)
  int adds = 1;
  explicit AddChain(int n) : adds(n) {}
  auto forward(const auto& x) const {
    auto y = x + 1.f;
    for (int i = 1; i < adds; ++i) y = y + 1.f;
    return y;
  }
};

}  // namespace models
