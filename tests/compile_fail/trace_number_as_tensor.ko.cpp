// expect: received a number or tmod::none where it needs a tensor
// A number passed while tracing where F::conv2d needs a tensor (its weight).
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& w) { return F::conv2d(x, 2.f) + w; },
                                      tmod::spec({1, 3, 8, 8}), tmod::spec({4, 3, 3, 3}));
  (void)g;
}
