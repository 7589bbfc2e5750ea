// The reduced-width ResNet-18 and MobileNetV2 of tests/data (torchvision's structure and names),
// traced once at 1x3x32x32 with a dynamic batch and image size, against PyTorch's outputs
// (tests/data/dynamic_shapes, gen_dynamic_shapes.py) at batch 1, 3 and 8 and at 224 and 160 pixels:
// as traced, optimized, and saved and loaded back.
#include <model_goldens.hpp>
#include <models/mobilenet_v2.hpp>
#include <models/resnet.hpp>

#include <tracemod/io/serialize.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace tmod_test_serialize_dynamic_goldens {

namespace {

namespace tmod = tracemod;

/// Traces `net` once with N, H and W dynamic and checks the plain, optimized and reloaded traces
/// against PyTorch at every stored shape.
template <class Net>
void check_against_pytorch(const Net& net, const std::string& model) {
  const tmod::TracedModule traced = tmod::trace_module(net, golden::sine_input(1, 32),
                                                       tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}});
  const tmod::TracedModule optimized =
      tmod::optimize(traced, {"FuseConvBn", "FuseAddMul", "BackwardFoldScale", "FuseConvEpilogue", "FuseElemwise"});
  const auto path = std::filesystem::temp_directory_path() / ("tracemod_dynamic_" + model + ".tmod");
  tmod::save(optimized, path);
  const tmod::TracedModule loaded = tmod::load(path);
  std::filesystem::remove(path);
  for (const golden::dynamic_case& c : golden::dynamic_cases) {
    const std::string name = golden::dynamic_case_name(model, c);
    const tmod::Tensor expected = golden::dynamic_output(model, c);
    const double scale = golden::max_abs(expected);
    const tmod::Tensor x = golden::sine_input(c.batch, c.size);
    golden::check_close(traced(x).tensor(), expected, 1e-4, 1e-4 * scale, name + " traced");
    golden::check_close(optimized(x).tensor(), expected, 1e-4, 1e-4 * scale, name + " optimized");
    golden::check_close(loaded(x).tensor(), expected, 1e-4, 1e-4 * scale, name + " saved and loaded");
  }
  CHECK(traced.graph().plans_built() == 1);  // every shape ran on the one plan
}

}  // namespace

TEST_CASE("ResNet-18 traced once with dynamic N, H, W equals PyTorch at batch 1, 3, 8 and 224, 160 pixels") {
  models::ResNet net(10, 8);
  REQUIRE(net.load_state_dict(golden::model_state_dict("resnet18")).empty());
  net.eval();
  check_against_pytorch(net, "resnet18");
}

TEST_CASE("MobileNetV2 traced once with dynamic N, H, W equals PyTorch at batch 1, 3, 8 and 224, 160 pixels") {
  models::MobileNetV2 net = models::mobilenet_v2(10, 0.25, 4);
  REQUIRE(net.load_state_dict(golden::model_state_dict("mobilenet_v2")).empty());
  net.eval();
  check_against_pytorch(net, "mobilenet_v2");
}

}  // namespace tmod_test_serialize_dynamic_goldens
