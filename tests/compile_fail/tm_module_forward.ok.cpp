// A module's forward is a const member taking the call's arguments.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/reflection.hpp>

namespace tmod = tracemod;

struct Net : tmod::Module {
  TM_MODULE(Net)
  auto forward(const auto& x) const { return x; }
};

int main() {
  const Net net;
  (void)net(tmod::zeros({2}));
}
