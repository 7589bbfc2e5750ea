// expect: static input features do not match
// F::linear on static shapes whose last input extent differs from the weight's in_features.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& w) { return F::linear(x, w); },
                                      tmod::spec<5, 4>(), tmod::spec<3, 5>());
  (void)g;
}
