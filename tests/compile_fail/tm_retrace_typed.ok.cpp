// The OK twin: the compile-time tracer records a call of the traced module on tensors.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>

namespace tmod = tracemod;

struct Inner : tmod::Module {
  TM_MODULE(Inner)
  auto forward(const auto& x) const { return x + 1; }
};

struct Net : tmod::Module {
  tmod::TracedModule inner;
  TM_MODULE(Net, inner)
  explicit Net(tmod::TracedModule m) : inner(std::move(m)) {}
  auto forward(const auto& x) const { return inner.forward(x) * 2; }
};

int main() {
  const Net net(tmod::trace_module(Inner{}, tmod::zeros({2})));
  (void)tmod::symbolic_trace(net, tmod::spec({2}));
}
