// expect: a typed graph cannot hold: its shapes are static, so pass the target shape as a list (F::reshape)
// A reshape to a shape computed as a value, in a typed graph (whose shapes are static).
#include <tracemod/functional/shape_values.hpp>
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x) { return F::reshape_to(x, F::shape_of(x)); }, tmod::spec<2, 3>());
  (void)g;
}
