// Branching with `if` on a symbolic tensor: it has no value while tracing.
// Done right here; trace_if_symbolic.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace(bool flag) {
  const auto g = tmod::symbolic_trace(
      [flag](const auto& x) {
        float scale = 1.f;
        if (flag) scale = 2.f;  // a non-tensor value decides the branch
        return x * scale;
      },
      tmod::spec({3}));
  (void)g;
}
