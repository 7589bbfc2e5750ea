// expect: register_forward_pre_hook: the hook must be callable as fn(const tmod::Module&, std::span<const tmod::Value> inputs)
// A pre-hook sees the inputs as values, not as the forward's own argument types.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/linear.hpp>

namespace tmod = tracemod;

int main() {
  tracemod::nn::Linear fc(2, 2);
  const tmod::HookHandle h = fc.register_forward_pre_hook([](const tmod::Module&, const tmod::Tensor& x) { return x * 2.f; });
  (void)h;
}
