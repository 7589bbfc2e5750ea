// A reshape in a typed graph (whose shapes are static).
// Done right here; trace_reshape_to_typed.ko.cpp has the misuse.
#include <tracemod/functional/shape_values.hpp>
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x) { return F::reshape(x, {3, 2}); }, tmod::spec<2, 3>());
  (void)g;
}
