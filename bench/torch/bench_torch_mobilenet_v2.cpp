// MobileNetV2 (examples/models/mobilenet_v2.hpp) against libtorch on the same weights: see
// side_by_side.hpp. tracemod_optimized is the module traced (once per batch size, before timing),
// flattened and optimized with every pass. Flattening matters here: a pass rewrites one graph at a
// time, and a block's shortcut add sits in the InvertedResidual's graph while the projection conv
// it would take in as a residual epilogue sits in the nested Sequential's.
#include <models/mobilenet_v2.hpp>
#include <torch/side_by_side.hpp>

#include <memory>

namespace tmod_bench_torch_mobilenet_v2 {

namespace {

namespace side = tracemod::bench::torch_side;

std::shared_ptr<models::MobileNetV2> load_mobilenet_v2(const tracemod::StateDict& weights) {
  auto net = std::make_shared<models::MobileNetV2>(models::mobilenet_v2());
  net->load_state_dict(weights);
  net->eval();
  return net;
}

const bool registered = [] {
  side::register_side_by_side(
      "mobilenet_v2",
      [](const tracemod::StateDict& weights) {
        return [net = load_mobilenet_v2(weights)](const tracemod::Tensor& x) { return tracemod::Tensor((*net)(x)); };
      },
      side::traced_and_optimized(load_mobilenet_v2, true));
  return true;
}();

}  // namespace

}  // namespace tmod_bench_torch_mobilenet_v2
