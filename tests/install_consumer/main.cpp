// What a consumer of the installed package needs: the include path, the compile definitions and
// the link to OpenMP that tracemod::tracemod carries. It includes the core layer, not the umbrella:
// the umbrella compiling is the header check's (tests/CMakeLists.txt), and here it would only
// repeat minutes of instantiation in a Debug build.
#include <tracemod/core.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/version.hpp>

#include <atomic>
#include <iostream>

namespace tmod = tracemod;

int main() {
  const tmod::Tensor x = tmod::tensor({-1.f, 2.f, 3.f, -4.f});
  const float* data = x.data<float>();
  std::atomic<int> positive = 0;
  tmod::set_num_threads(2);
  tmod::parallel_for(0, x.numel(), 1, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) positive += data[i] > 0.f;
  });
  std::cout << "tracemod " << TRACEMOD_VERSION_STRING << ": " << positive << " of " << x.numel()
            << " elements positive\n";
  return positive == 2 ? 0 : 1;
}
