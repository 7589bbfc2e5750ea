// expect: received a number or tmod::none where it needs a tensor
// tmod::none passed while tracing where F::linear needs a tensor (its weight; only the bias is optional).
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& w) { return F::linear(x, tmod::none, w); },
                                      tmod::spec({2, 4}), tmod::spec({3, 4}));
  (void)g;
}
