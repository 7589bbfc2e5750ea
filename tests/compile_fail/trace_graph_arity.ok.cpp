// A typed graph called with fewer tensors than it has symbolic inputs.
// Done right here; trace_graph_arity.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

tmod::Tensor run(const tmod::Tensor& a, const tmod::Tensor& b) {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& y) { return x - y; }, tmod::spec({3}),
                                      tmod::spec({3}));
  return g(a, b);
}
