// expect: a comparison (==, <, ...) of symbolic tensors gives no bool while tracing
// Comparing a symbolic tensor with a number to pick a branch.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace(
      [](const auto& x) {
        float floor = 0.f;
        if (x > 0.f) floor = 1.f;
        return F::maximum(x, floor);
      },
      tmod::spec({3}));
  (void)g;
}
