// VisionTransformer (examples/models/vit.hpp) and ConvNeXt (examples/models/convnext.hpp) against
// torchvision 0.14: the default networks' state_dict keys and shapes are vit_b_16's and
// convnext_tiny's, in order, and the reduced-width networks of tests/data/vit and
// tests/data/convnext (gen_goldens.py, zoo_models) load a torchvision state_dict strictly and match
// its output eagerly, traced, optimized and saved -> loaded.
#include <model_goldens.hpp>
#include <models/convnext.hpp>
#include <models/vit.hpp>

#include <tracemod/io/serialize.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace tmod_test_nn_torchvision_models {

namespace {

namespace tmod = tracemod;
using tmod::Tensor;

/// "<key> <d0,d1,...>" for every state_dict entry of `m`, in order.
std::vector<std::string> key_lines(const tmod::Module& m) {
  std::vector<std::string> lines;
  for (const auto& [key, value] : m.state_dict()) {
    std::string dims;
    for (std::size_t i = 0; i < value.shape().size(); ++i) dims += (i ? "," : "") + std::to_string(value.shape()[i]);
    lines.push_back(key + " " + dims);
  }
  return lines;
}

std::vector<std::string> torchvision_keys(const std::string& model) {
  std::ifstream in(golden::data_dir() / model / "torchvision_keys.txt");
  REQUIRE(in);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// max |actual - expected| over max |expected|: the error relative to the logits' scale.
double scaled_error(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.shape() == expected.shape());
  const auto a = actual.values<float>();
  const auto e = expected.values<float>();
  double err = 0;
  for (std::size_t i = 0; i < a.size(); ++i) err = std::max(err, std::abs(double(a[i]) - double(e[i])));
  return err / golden::max_abs(expected);
}

std::string graph_text(const tmod::TracedModule& m) {
  std::ostringstream os;
  os << m.graph();
  return os.str();
}

tmod::TracedModule round_trip(const tmod::TracedModule& m) {
  std::ostringstream os;
  tmod::save(m, os);
  const std::string bytes = os.str();
  return tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

/// Loads tests/data/<model> into `net` strictly, then checks eager, traced, flattened + optimized
/// (every registered pass) and saved -> loaded outputs against PyTorch's (float64 reference), each
/// within 1e-4 of the logits' scale. Returns the traced module's graph text.
template <class Net>
std::string check_golden(Net& net, const std::string& model) {
  CAPTURE(model);
  const auto dir = golden::data_dir() / model;
  const Tensor x = tmod::io::load_npy(dir / "input.npy");
  const Tensor expected = tmod::io::load_npy(dir / "output.npy");
  REQUIRE(golden::max_abs(expected) > 0.5);
  net.eval();
  CHECK(scaled_error(net(x), expected) > 1e-2);  // the constructor's weights are not torchvision's
  CHECK(net.load_state_dict(golden::model_state_dict(model)).empty());  // strict: every key, no extra

  const Tensor eager = net(x);
  const double eager_err = scaled_error(eager, expected);
  CAPTURE(eager_err);
  CHECK(eager_err <= 1e-4);

  const tmod::TracedModule traced = tmod::trace_module(net, x);
  tmod::check(traced.graph());
  const double traced_err = scaled_error(traced(x).tensor(), expected);
  CAPTURE(traced_err);
  CHECK(traced_err <= 1e-4);
  CHECK(scaled_error(traced(x).tensor(), eager) <= 1e-6);

  const tmod::TracedModule flat = traced.flatten();
  CHECK(scaled_error(flat(x).tensor(), eager) <= 1e-6);
  const tmod::TracedModule optimized = tmod::optimize(flat, tmod::registered_passes());
  CHECK(graph_text(optimized) != graph_text(flat));
  const double optimized_err = scaled_error(optimized(x).tensor(), expected);
  CAPTURE(optimized_err);
  CHECK(optimized_err <= 1e-4);

  const tmod::TracedModule loaded = round_trip(optimized);
  const double loaded_err = scaled_error(loaded(x).tensor(), expected);
  CAPTURE(loaded_err);
  CHECK(loaded_err <= 1e-4);
  CHECK(scaled_error(round_trip(traced)(x).tensor(), eager) <= 1e-6);
  return graph_text(traced);
}

/// Traced at one image with the batch axis dynamic, `net` (holding tests/data/<model>'s state)
/// runs the golden batch of two and matches PyTorch.
template <class Net>
void check_dynamic_batch(const Net& net, const std::string& model) {
  CAPTURE(model);
  const auto dir = golden::data_dir() / model;
  const tmod::TracedModule traced =
      tmod::trace_module(net, tmod::randn({1, 3, 32, 32}, 7), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  const Tensor expected = tmod::io::load_npy(dir / "output.npy");
  CHECK(scaled_error(traced(tmod::io::load_npy(dir / "input.npy")).tensor(), expected) <= 1e-4);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// A CHECK per part that `text` contains it.
void check_has_all(const std::string& text, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    CAPTURE(part);
    CHECK(has(text, part));
  }
}

models::VisionTransformer small_vit() {
  return models::VisionTransformer(
      {.image_size = 32, .patch_size = 16, .num_layers = 2, .num_heads = 4, .hidden_dim = 64, .mlp_dim = 128, .num_classes = 10});
}

models::ConvNeXt small_convnext() { return models::ConvNeXt({.dims = {16, 32, 64, 96}, .depths = {1, 1, 2, 1}, .num_classes = 10}); }

}  // namespace

TEST_CASE("VisionTransformer: vit_b_16's state_dict keys and shapes are torchvision's, in order") {
  const std::vector<std::string> expected = torchvision_keys("vit");
  REQUIRE(expected.size() == 152);  // class token, conv_proj 2, pos_embedding, 12 layers x 12, ln 2, head 2
  CHECK(key_lines(models::vit_b_16()) == expected);
}

TEST_CASE("ConvNeXt: convnext_tiny's state_dict keys and shapes are torchvision's, in order") {
  const std::vector<std::string> expected = torchvision_keys("convnext");
  REQUIRE(expected.size() == 182);
  CHECK(key_lines(models::convnext_tiny()) == expected);
}

TEST_CASE("VisionTransformer: loads a torchvision state_dict and matches it eagerly, traced, optimized and loaded") {
  models::VisionTransformer net = small_vit();
  const std::string text = check_golden(net, "vit");
  // class_token is an attribute, not a constant, at batch 2.
  check_has_all(text, {"conv_proj(x, )", "encoder = getattr(self, \"encoder\")", "heads = getattr(self, \"heads\")",
                       "tensor.concat", "getattr(self, \"class_token\")"});
  const std::string encoder = graph_text(tmod::trace_module(net, tmod::io::load_npy(golden::data_dir() / "vit" / "input.npy"))
                                             .getattr("encoder")
                                             .as<tmod::TracedModule>());
  check_has_all(encoder, {"getattr(self, \"pos_embedding\")", "getattr(self, \"layers.encoder_layer_1\")"});
  check_dynamic_batch(net, "vit");
}

TEST_CASE("VisionTransformer: an image of another size or bad options are refused, naming the sizes") {
  const models::VisionTransformer net = small_vit();
  CHECK_THROWS_WITH_AS((void)net(tmod::randn({1, 3, 48, 48})), doctest::Contains("(N, 3, 32, 32)"), tmod::shape_error);
  CHECK_THROWS_AS(models::VisionTransformer({.image_size = 30, .patch_size = 16}), tmod::value_error);
  CHECK_THROWS_WITH_AS(models::VisionTransformer({.image_size = 32, .patch_size = 16, .num_layers = 0, .num_heads = 5, .hidden_dim = 64}),
                       doctest::Contains("hidden_dim 64 must be a positive multiple of num_heads 5"), tmod::value_error);
}

TEST_CASE("ConvNeXt: loads a torchvision state_dict and matches it eagerly, traced, optimized and loaded") {
  models::ConvNeXt net = small_convnext();
  const std::string text = check_golden(net, "convnext");
  check_has_all(text, {"getattr(self, \"features.0\")", "getattr(self, \"features.5.1\")", "getattr(self, \"features.6\")",
                       "avgpool(", "classifier("});
  const auto& block = net.getattr("features.5.1.block.0").as<tmod::nn::Conv2d>();
  CHECK(block.groups == 64);  // depthwise
  CHECK_THROWS_AS(models::ConvNeXt({.dims = {16, 0, 64, 128}}), tmod::value_error);
  check_dynamic_batch(net, "convnext");
}

}  // namespace tmod_test_nn_torchvision_models
