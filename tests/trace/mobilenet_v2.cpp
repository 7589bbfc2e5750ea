// MobileNetV2 traced by the compile-time tracer: the typed graph of the torchvision-weighted
// reduced-width network (tests/data/mobilenet_v2) equals PyTorch's output and eager mode.
#include <model_goldens.hpp>
#include <models/mobilenet_v2.hpp>

#include <tracemod/trace.hpp>

#include <doctest/doctest.h>

namespace tmod_test_trace_mobilenet_v2 {

namespace {

namespace tmod = tracemod;
namespace M = tracemod::nn;

}  // namespace

TEST_CASE("MobileNetV2: the typed graph matches PyTorch and eager mode") {
  models::MobileNetV2 net = models::mobilenet_v2(10, 0.25, 4);
  CHECK(net.load_state_dict(golden::model_state_dict("mobilenet_v2")).empty());
  net.eval();
  const auto g = tmod::symbolic_trace(net, tmod::spec({1, 3, 32, 32}));
  CHECK(tmod::count_ops<M::Conv2d>(g) == 52);  // stem, 1 x 2 + 16 x 3 in the blocks, head
  CHECK(tmod::count_ops<M::ReLU6>(g) == 35);
  CHECK(tmod::count_ops<M::Dropout>(g) == 1);
  const auto dir = golden::data_dir() / "mobilenet_v2";
  const tmod::Tensor x = tmod::io::load_npy(dir / "input.npy");
  const tmod::Tensor expected = tmod::io::load_npy(dir / "output.npy");
  const tmod::Tensor y = g(x);
  golden::check_close(y, expected, 1e-4, 1e-4 * golden::max_abs(expected), "traced mobilenet_v2");
  golden::check_close(y, net(x), 0.0, 0.0, "traced vs eager mobilenet_v2");
}

}  // namespace tmod_test_trace_mobilenet_v2
