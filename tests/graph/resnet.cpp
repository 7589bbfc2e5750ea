// ResNet-18 through trace_module: MegEngine's documented structure for the top graph, layer1 and the
// flattened graph, and outputs equal to eager mode bit for bit.
#include "graph_test.hpp"

#include <models/resnet.hpp>

#include <string>
#include <vector>

namespace tmod_test_graph_resnet {

using namespace graph_test;

namespace {

/// The expr lines of a graph without ids: "conv1 = getattr(self, \"conv1\") -> (Conv2d)".
std::vector<std::string> lines(const tmod::graph::Graph& g) {
  std::vector<std::string> v;
  for (const auto& e : g.expr_list_()) {
    const std::string s = tmod::graph::to_string(*e);
    v.push_back(s.substr(s.find('\t') + 1));
  }
  return v;
}

}  // namespace

TEST_CASE("ResNet-18: top graph, layer1, a downsampling block, and flatten") {
  models::ResNet net(10, 8);
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 32, 32});
  tmod::TracedModule t = tmod::trace_module(net, x);
  CHECK(lines(t.graph()) == std::vector<std::string>{
                                "conv1 = getattr(self, \"conv1\") -> (Conv2d)",
                                "conv1_out = conv1(x, )",
                                "bn1 = getattr(self, \"bn1\") -> (BatchNorm2d)",
                                "bn1_out = bn1(conv1_out, )",
                                "relu = getattr(self, \"relu\") -> (ReLU)",
                                "relu_out = relu(bn1_out, )",
                                "maxpool = getattr(self, \"maxpool\") -> (MaxPool2d)",
                                "maxpool_out = maxpool(relu_out, )",
                                "layer1 = getattr(self, \"layer1\") -> (Module)",
                                "layer1_out = layer1(maxpool_out, )",
                                "layer2 = getattr(self, \"layer2\") -> (Module)",
                                "layer2_out = layer2(layer1_out, )",
                                "layer3 = getattr(self, \"layer3\") -> (Module)",
                                "layer3_out = layer3(layer2_out, )",
                                "layer4 = getattr(self, \"layer4\") -> (Module)",
                                "layer4_out = layer4(layer3_out, )",
                                "avgpool = getattr(self, \"avgpool\") -> (AdaptiveAvgPool2d)",
                                "avgpool_out = avgpool(layer4_out, )",
                                "flatten_out = tensor.flatten(avgpool_out, 1, -1, )",
                                "fc = getattr(self, \"fc\") -> (Linear)",
                                "fc_out = fc(flatten_out, )",
                            });
  // Ids skip over the sub-graphs: layer1 is called at %11 and its 34 exprs (with inputs) follow.
  const auto calls = t.graph().get_method_by_type("__call__", false).as_list();
  CHECK(calls[4]->id() == 11);
  CHECK(calls[5]->id() == 47);
  CHECK(text(sub(t, "layer1").graph()) ==
        "ResNet_layer1.Graph (self, x) {\n"
        "\t%14:\t_0 = getattr(self, \"0\") -> (Module)\n"
        "\t%15:\t_0_out = _0(x, )\n"
        "\t%30:\t_1 = getattr(self, \"1\") -> (Module)\n"
        "\t%31:\t_1_out = _1(_0_out, )\n"
        "\treturn _1_out\n"
        "}");
  CHECK(lines(sub(t, "layer2.0").graph()) == std::vector<std::string>{
                                                 "conv1 = getattr(self, \"conv1\") -> (Conv2d)",
                                                 "conv1_out = conv1(x, )",
                                                 "bn1 = getattr(self, \"bn1\") -> (BatchNorm2d)",
                                                 "bn1_out = bn1(conv1_out, )",
                                                 "relu = getattr(self, \"relu\") -> (ReLU)",
                                                 "relu_out = relu(bn1_out, )",
                                                 "conv2 = getattr(self, \"conv2\") -> (Conv2d)",
                                                 "conv2_out = conv2(relu_out, )",
                                                 "bn2 = getattr(self, \"bn2\") -> (BatchNorm2d)",
                                                 "bn2_out = bn2(conv2_out, )",
                                                 "downsample = getattr(self, \"downsample\") -> (Module)",
                                                 "downsample_out = downsample(x, )",
                                                 "add_out = bn2_out.__add__(downsample_out, )",
                                                 "relu_out_1 = relu(add_out, )",
                                             });
  // Ids are unique and contiguous over the whole hierarchy.
  const auto exprs = t.graph().exprs().as_list();
  for (std::size_t i = 0; i < exprs.size(); ++i) CHECK(exprs[i]->id() == static_cast<std::int64_t>(i));
  CHECK(t.total_ids().second == static_cast<std::int64_t>(exprs.size()));
  tmod::check(t.graph());
  check_identical(t(x), net(x));

  tmod::TracedModule flat = t.flatten();
  const tmod::graph::Graph& f = flat.graph();
  tmod::check(f);
  // conv1, bn1, relu, maxpool; per block conv1, bn1, relu, conv2, bn2, relu; 3 downsamples; avgpool, fc.
  CHECK(f.get_method_by_type("__call__").as_count() == 4 + 8 * 6 + 3 * 2 + 2);
  CHECK(f.get_module_by_type<tmod::TracedModule>().as_count() == 1);  // only `self` is left
  const auto fl = lines(f);
  CHECK(std::find(fl.begin(), fl.end(), "layer1__0_conv1 = getattr(self, \"layer1.0.conv1\") -> (Conv2d)") != fl.end());
  CHECK(std::find(fl.begin(), fl.end(), "layer1__0_conv1_out = layer1__0_conv1(maxpool_out, )") != fl.end());
  CHECK(std::find(fl.begin(), fl.end(), "layer1__0_out = layer1__0_relu(layer1__0_add_out, )") != fl.end());
  CHECK(std::find(fl.begin(), fl.end(), "layer1_out = layer1__1_relu(layer1__1_add_out, )") != fl.end());
  CHECK(std::find(fl.begin(), fl.end(),
                  "layer2__0_downsample_out = layer2__0_downsample__1(layer2__0_downsample__0_out, )") != fl.end());
  const auto nodes = f.nodes().as_list();
  for (std::size_t i = 0; i < nodes.size(); ++i) CHECK(nodes[i]->id() == static_cast<std::int64_t>(i));
  check_identical(flat(x), net(x));
  CHECK(text(flat.flatten().graph()) == text(f));
}

TEST_CASE("ResNet-18 at full width: the traced module runs the same kernels as eager mode") {
  models::ResNet net;
  net.eval();
  // 112x112: every layer at full width, planes from 56x56 down to 4x4 (a quarter of 224x224's work).
  const tmod::Tensor x = tmod::randn({1, 3, 112, 112});
  tmod::TracedModule t = tmod::trace_module(net, x, tmod::TraceOptions{.check = false});
  check_identical(t(x), net(x));
  check_identical(t.flatten()(x), net(x));
}

}  // namespace tmod_test_graph_resnet
