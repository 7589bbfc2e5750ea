// expect: static input channels do not match
// F::conv2d on static shapes whose input channels differ from the weight's.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& w) { return F::conv2d(x, w); },
                                      tmod::spec<1, 3, 8, 8>(), tmod::spec<4, 2, 3, 3>());
  (void)g;
}
