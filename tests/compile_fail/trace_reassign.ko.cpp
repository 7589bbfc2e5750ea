// expect: a variable holding a symbolic tensor cannot be reassigned
// A forward that reassigns a variable is not single-assignment: every call has its own node type, so
// `x = x + 1` does not compile under the typed tracer (the run-time tracer handles it).
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace(
      [](auto x) {
        x = x + 1.f;
        return x * 2.f;
      },
      tmod::spec({3}));
  (void)g;
}
