// A forward that reassigns a variable is not single-assignment: every call has its own node type, so
// `x = x + 1` does not compile under the typed tracer (the run-time tracer handles it).
// Done right here; trace_reassign.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace(
      [](const auto& x) {
        const auto y = x + 1.f;
        return y * 2.f;
      },
      tmod::spec({3}));
  (void)g;
}
