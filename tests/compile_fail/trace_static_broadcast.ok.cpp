// Static shapes that numpy broadcasting cannot combine.
// Done right here; trace_static_broadcast.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& y) { return x + y; }, tmod::spec<2, 3>(),
                                      tmod::spec<3>());
  (void)g;
}
