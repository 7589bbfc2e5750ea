// expect: pass one tmod::spec
// Something other than a tmod::spec given for a symbolic input.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x) { return F::relu(x); }, tmod::Shape{3});
  (void)g;
}
