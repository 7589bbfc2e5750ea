// tmod::none passed while tracing where F::linear needs a tensor (its weight; only the bias is optional).
// Done right here; trace_none_as_tensor.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& w) { return F::linear(x, w, tmod::none); },
                                      tmod::spec({2, 4}), tmod::spec({3, 4}));
  (void)g;
}
