// F::linear on static shapes whose last input extent differs from the weight's in_features.
// Done right here; trace_static_linear_features.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& w) { return F::linear(x, w); },
                                      tmod::spec<5, 4>(), tmod::spec<3, 4>());
  (void)g;
}
