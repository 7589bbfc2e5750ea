// tmod::static_output_shape on a graph traced from a dynamic spec.
// Done right here; trace_static_output_shape.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x) { return F::relu(x); }, tmod::spec<3>());
  static_assert(tmod::static_output_shape(g) == tmod::Shape{3});
}
