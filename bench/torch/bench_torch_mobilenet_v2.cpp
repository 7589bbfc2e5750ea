// MobileNetV2 (examples/models/mobilenet_v2.hpp) against libtorch on the same weights: see
// side_by_side.hpp.
#include <models/mobilenet_v2.hpp>
#include <torch/side_by_side.hpp>

#include <memory>

namespace tmod_bench_torch_mobilenet_v2 {

namespace {

namespace side = tracemod::bench::torch_side;

const bool registered = [] {
  side::register_side_by_side("mobilenet_v2", [](const tracemod::StateDict& weights) {
    auto net = std::make_shared<models::MobileNetV2>(models::mobilenet_v2());
    net->load_state_dict(weights);
    net->eval();
    return [net](const tracemod::Tensor& x) { return tracemod::Tensor((*net)(x)); };
  });
  return true;
}();

}  // namespace

}  // namespace tmod_bench_torch_mobilenet_v2
