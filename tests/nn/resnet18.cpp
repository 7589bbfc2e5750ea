// ResNet-18 (examples/models/resnet.hpp) against PyTorch: the torchvision-named state_dict of a
// width-8 network (tests/data/resnet18, from tests/reference/gen_modules.py) loads strictly, and
// the eval-mode output matches.
#include <model_goldens.hpp>
#include <thread_counts.hpp>
#include <tracemod/kernels/conv2d.hpp>
#include <models/resnet.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace tmod_test_nn_resnet18 {

namespace {

namespace tmod = tracemod;

}  // namespace

TEST_CASE("ResNet-18: torchvision's module tree and names") {
  models::ResNet net(10, 8);
  std::vector<std::string> modules;
  for (const auto& [name, m] : net.named_modules()) modules.push_back(name + ":" + std::string(m.type_name()));
  CHECK(modules.size() == 1 + 4 + 4 * (1 + 2 * (1 + 5)) + 3 * 3 + 2);  // 68, as torchvision's
  CHECK(modules[0] == ":ResNet");
  CHECK(std::find(modules.begin(), modules.end(), "layer1.0:BasicBlock") != modules.end());
  CHECK(std::find(modules.begin(), modules.end(), "layer3.0.downsample:Sequential") != modules.end());
  CHECK(std::find(modules.begin(), modules.end(), "layer3.0.downsample.1:BatchNorm2d") != modules.end());
  CHECK(std::find(modules.begin(), modules.end(), "layer4.1.conv2:Conv2d") != modules.end());
  CHECK(modules.back() == "fc:Linear");
  CHECK(net.getattr("layer1.0.downsample").is_none());
  CHECK(net.getattr("layer2.0.downsample.0").as<tmod::nn::Conv2d>().stride == tmod::functional::pair2{2});
  CHECK(net.state_dict().size() == 122);
}

TEST_CASE("ResNet-18: loads a torchvision-named state_dict and matches PyTorch's output") {
  const auto dir = golden::data_dir() / "resnet18";
  const tmod::Tensor x = tmod::io::load_npy(dir / "input.npy");
  const tmod::Tensor expected = tmod::io::load_npy(dir / "output.npy");
  models::ResNet net(10, 8);
  net.eval();
  const tmod::Tensor before = net(x);
  REQUIRE(before.shape() == expected.shape());
  // 1e-4 relative to the output's scale (logits near zero make an elementwise relative bound meaningless).
  const double scale = golden::max_abs(expected);
  REQUIRE(scale > 0.1);
  CHECK_FALSE(golden::compare(before, expected, 1e-4, 1e-4 * scale).ok);  // random weights do not match

  const tmod::IncompatibleKeys report = net.load_state_dict(golden::model_state_dict("resnet18"));  // strict
  CHECK(report.empty());
  CHECK(net.layer2.get<0>().downsample.get<1>().num_batches_tracked.item<std::int32_t>() == 1);
  golden::check_close(net(x), expected, 1e-4, 1e-4 * scale, "resnet18");

  // Every 3x3 stride-1 convolution through Winograd F(4x4, 3x3): the same bound holds.
  tmod::kernels::set_conv2d_algorithm(tmod::kernels::conv2d_algorithm::winograd);
  const tmod::Tensor winograd = net(x);
  tmod::kernels::set_conv2d_algorithm(tmod::kernels::conv2d_algorithm::automatic);
  golden::check_close(winograd, expected, 1e-4, 1e-4 * scale, "resnet18 with Winograd");
}

TEST_CASE("ResNet-18: the forward is bit-identical at 1, 2, 3 and 4 threads") {
  models::ResNet net(10, 8);
  net.eval();
  for (const std::int64_t batch : {1, 3}) {
    const tmod::Tensor x = tmod::randn({batch, 3, 40, 40}, 5);
    thread_counts::check_bit_identical("resnet18 batch " + std::to_string(batch), [&] {
      const tmod::Tensor y = net(x);
      const auto v = y.values<float>();
      return std::vector<float>(v.begin(), v.end());
    });
  }
}

}  // namespace tmod_test_nn_resnet18
