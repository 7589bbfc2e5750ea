// Comparing a symbolic tensor with a number to pick a branch.
// Done right here; trace_compare_symbolic.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x) { return F::maximum(x, 0.f); }, tmod::spec({3}));
  (void)g;
}
