// ResNet-18 (examples/models/resnet.hpp) against libtorch on the same weights: see side_by_side.hpp.
// tracemod_optimized is the module traced (once per batch size, before timing) and optimized with
// every pass.
#include <models/resnet.hpp>
#include <torch/side_by_side.hpp>

#include <memory>

namespace tmod_bench_torch_resnet {

namespace {

namespace side = tracemod::bench::torch_side;

std::shared_ptr<models::ResNet> load_resnet18(const tracemod::StateDict& weights) {
  auto net = std::make_shared<models::ResNet>(models::resnet18());
  net->load_state_dict(weights);
  net->eval();
  return net;
}

const bool registered = [] {
  side::register_side_by_side(
      "resnet18",
      [](const tracemod::StateDict& weights) {
        return [net = load_resnet18(weights)](const tracemod::Tensor& x) { return tracemod::Tensor((*net)(x)); };
      },
      side::traced_and_optimized(load_resnet18, false));
  return true;
}();

}  // namespace

}  // namespace tmod_bench_torch_resnet
