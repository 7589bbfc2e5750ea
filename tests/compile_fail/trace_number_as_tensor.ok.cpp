// A number passed while tracing where F::conv2d needs a tensor (its weight).
// Done right here; trace_number_as_tensor.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& w) { return F::conv2d(x, w); },
                                      tmod::spec({1, 3, 8, 8}), tmod::spec({4, 3, 3, 3}));
  (void)g;
}
