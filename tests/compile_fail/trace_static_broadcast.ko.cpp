// expect: cannot be broadcast together; fix the tmod::spec
// Static shapes that numpy broadcasting cannot combine.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& y) { return x + y; }, tmod::spec<2, 3>(),
                                      tmod::spec<4>());
  (void)g;
}
