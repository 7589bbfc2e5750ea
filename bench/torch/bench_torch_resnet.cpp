// ResNet-18 (examples/models/resnet.hpp) against libtorch on the same weights: see side_by_side.hpp.
#include <models/resnet.hpp>
#include <torch/side_by_side.hpp>

#include <memory>

namespace {

namespace side = tracemod::bench::torch_side;

const bool registered = [] {
  side::register_side_by_side("resnet18", [](const tracemod::StateDict& weights) {
    auto net = std::make_shared<models::ResNet>(models::resnet18());
    net->load_state_dict(weights);
    net->eval();
    return [net](const tracemod::Tensor& x) { return tracemod::Tensor((*net)(x)); };
  });
  return true;
}();

}  // namespace
