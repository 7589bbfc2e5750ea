// expect: forward must return a tensor computed from its symbolic inputs
// A forward whose result is not a symbolic tensor (nor a tuple of them).
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x) { return (void)F::exp(x), 1.f; }, tmod::spec({3}));
  (void)g;
}
