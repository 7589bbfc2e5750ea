// expect: a symbolic tensor has no value while tracing, so it cannot decide a branch (if/while/bool)
// Branching with `if` on a symbolic tensor: it has no value while tracing.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace(bool flag) {
  const auto g = tmod::symbolic_trace(
      [flag](const auto& x) {
        float scale = 1.f;
        if (x) scale = 2.f;
        return x * scale;
      },
      tmod::spec({3}));
  (void)g;
  (void)flag;
}
