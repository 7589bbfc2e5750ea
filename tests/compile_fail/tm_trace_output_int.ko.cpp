// expect: tmod::trace_module: forward must return a tensor, or a std::tuple / std::pair / std::vector of tensors
// A forward returning a tensor and an int: only tensors (nested in tuples, pairs, vectors) are outputs.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/traced_module.hpp>

#include <tuple>

namespace tmod = tracemod;
namespace F = tracemod::functional;

struct Net : tmod::Module {
  TM_MODULE(Net)
  auto forward(const auto& x) const { return std::tuple(F::relu(x), 1); }
};

void trace() {
  const Net net;
  (void)tmod::trace_module(net, tmod::zeros({2}));
}
