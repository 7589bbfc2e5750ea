// Converting a symbolic tensor to bool explicitly.
// Done right here; trace_bool_symbolic.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace(bool flag) {
  const auto g = tmod::symbolic_trace([flag](const auto& x) { return flag ? x * 2.f : x * 3.f; },
                                      tmod::spec({3}));
  (void)g;
}
