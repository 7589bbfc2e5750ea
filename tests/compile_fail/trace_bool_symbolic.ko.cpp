// expect: a symbolic tensor has no value while tracing, so it cannot decide a branch (if/while/bool)
// Converting a symbolic tensor to bool explicitly.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace(bool flag) {
  const auto g = tmod::symbolic_trace([](const auto& x) { return bool(x) ? x * 2.f : x * 3.f; },
                                      tmod::spec({3}));
  (void)g;
  (void)flag;
}
