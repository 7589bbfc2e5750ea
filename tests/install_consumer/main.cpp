#include <tracemod/tracemod.hpp>

#include <iostream>

namespace tmod = tracemod;

int main() {
  const tmod::Tensor y = tmod::functional::relu(tmod::tensor({-1.f, 2.f}));
  std::cout << "tracemod " << TRACEMOD_VERSION_STRING << ": relu([-1, 2]) = [" << y.data<float>()[0] << ", "
            << y.data<float>()[1] << "]\n";
  return y.data<float>()[0] == 0.f && y.data<float>()[1] == 2.f ? 0 : 1;
}
