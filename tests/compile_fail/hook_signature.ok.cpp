// A pre-hook takes the module and its inputs as values, and may return one replacement input.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/linear.hpp>

namespace tmod = tracemod;

int main() {
  tracemod::nn::Linear fc(2, 2);
  const tmod::HookHandle h = fc.register_forward_pre_hook(
      [](const tmod::Module&, std::span<const tmod::Value> in) { return in[0].tensor() * 2.f; });
  (void)h;
}
