// expect: every tensor argument of a functional op must be a tmod::Tensor
// A non-tensor type (std::string) passed to an op beside a symbolic tensor.
#include <tracemod/trace.hpp>

#include <string>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const std::string offset = "1";
  const auto g = tmod::symbolic_trace([&](const auto& x) { return F::add(x, offset); }, tmod::spec({3}));
  (void)g;
}
