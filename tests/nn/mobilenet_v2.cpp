// MobileNetV2 (examples/models/mobilenet_v2.hpp) against torchvision: the full network's
// state_dict has torchvision's keys and shapes in torchvision's order, and a reduced-width network
// (tests/data/mobilenet_v2, from tests/reference/gen_mobilenet_v2.py) loads a torchvision
// state_dict strictly and matches its eval-mode output.
#include <model_goldens.hpp>
#include <models/mobilenet_v2.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tmod_test_nn_mobilenet_v2 {

namespace {

namespace tmod = tracemod;

std::string shape_string(const tmod::Shape& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(s[i]);
  }
  return out;
}

}  // namespace

TEST_CASE("MobileNetV2: the full network's state_dict keys and shapes are torchvision's, in order") {
  std::ifstream keys(golden::data_dir() / "mobilenet_v2" / "torchvision_keys.txt");
  REQUIRE(keys);
  std::vector<std::string> expected;
  for (std::string line; std::getline(keys, line);) expected.push_back(line);
  REQUIRE(expected.size() == 314);

  const models::MobileNetV2 net = models::mobilenet_v2();
  std::vector<std::string> actual;
  for (const auto& [key, value] : net.state_dict()) actual.push_back(key + " " + shape_string(value.shape()));
  CHECK(actual == expected);
}

TEST_CASE("MobileNetV2: torchvision's module tree") {
  const models::MobileNetV2 net = models::mobilenet_v2(10, 0.25, 4);
  std::vector<std::string> modules;
  for (const auto& [name, m] : net.named_modules()) modules.push_back(name + ":" + std::string(m.type_name()));
  const auto has = [&](const std::string& s) { return std::find(modules.begin(), modules.end(), s) != modules.end(); };
  CHECK(has("features.0.2:ReLU6"));
  CHECK(has("features.1:InvertedResidual"));
  CHECK(has("features.1.conv.1:Conv2d"));  // expansion 1: depthwise first, then the projection
  CHECK(has("features.2.conv.1.0:Conv2d"));
  CHECK(has("features.18.1:BatchNorm2d"));
  CHECK(has("classifier.0:Dropout"));
  CHECK(modules.back() == "classifier.1:Linear");
  const auto& dw = net.getattr("features.2.conv.1.0").as<tmod::nn::Conv2d>();
  CHECK(dw.groups == 4 * 6);  // depthwise over the expanded width of features.1's 4 channels
  CHECK(dw.stride == tmod::functional::pair2{2});
}

TEST_CASE("MobileNetV2: a width the typed block pattern cannot express is rejected") {
  // width 0.25 with round_nearest 8 makes features.1 map 8 -> 8 channels: torchvision adds a
  // shortcut there, which the default network's block type does not have.
  CHECK_THROWS_AS(models::mobilenet_v2(10, 0.25, 8), tmod::value_error);
}

TEST_CASE("MobileNetV2: loads a torchvision state_dict and matches its output") {
  const auto dir = golden::data_dir() / "mobilenet_v2";
  const tmod::Tensor x = tmod::io::load_npy(dir / "input.npy");
  const tmod::Tensor expected = tmod::io::load_npy(dir / "output.npy");
  models::MobileNetV2 net = models::mobilenet_v2(10, 0.25, 4);
  net.eval();
  const double scale = golden::max_abs(expected);
  REQUIRE(scale > 0.1);
  CHECK_FALSE(golden::compare(net(x), expected, 1e-4, 1e-4 * scale).ok);  // random weights do not match

  const tmod::IncompatibleKeys report = net.load_state_dict(golden::model_state_dict("mobilenet_v2"));  // strict
  CHECK(report.empty());
  golden::check_close(net(x), expected, 1e-4, 1e-4 * scale, "mobilenet_v2");
}

}  // namespace tmod_test_nn_mobilenet_v2
