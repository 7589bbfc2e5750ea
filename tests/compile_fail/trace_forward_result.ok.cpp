// A forward whose result is not a symbolic tensor (nor a tuple of them).
// Done right here; trace_forward_result.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x) { return F::exp(x); }, tmod::spec({3}));
  (void)g;
}
