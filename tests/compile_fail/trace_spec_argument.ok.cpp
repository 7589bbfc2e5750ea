// Something other than a tmod::spec given for a symbolic input.
// Done right here; trace_spec_argument.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x) { return F::relu(x); }, tmod::spec({3}));
  (void)g;
}
