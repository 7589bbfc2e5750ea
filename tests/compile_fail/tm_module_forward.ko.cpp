// expect: the module's forward cannot be called with these arguments; declare it as a const member
// A non-const forward cannot be called through the (const) call operator.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/reflection.hpp>

namespace tmod = tracemod;

struct Net : tmod::Module {
  TM_MODULE(Net)
  auto forward(const auto& x) { return x; }
};

int main() {
  const Net net;
  (void)net(tmod::zeros({2}));
}
