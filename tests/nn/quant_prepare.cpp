// quant::prepare on traced graphs: where observers go (against the hand-derived list), calibration
// (observer ranges against the eager float forward), the fake-quantized forward (against the same
// network written by hand with F::fake_quantize), qparams on the nodes and in the printed graph,
// save -> load, options and disable_quantize, and bad input.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/quant.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace tmod_test_nn_quant_prepare {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
namespace Q = tracemod::quant;
using tmod::Tensor;

std::string text(const tmod::TracedModule& m) {
  std::ostringstream os;
  for (const auto* g : m.graph().graphs(true)) os << *g << "\n";
  return os.str();
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

tmod::TracedModule round_trip(const tmod::TracedModule& m) {
  std::ostringstream os;
  tmod::save(m, os);
  const std::string bytes = os.str();
  return tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

// PyTorch FX's PTQ setting: MinMax quint8 affine activations, per-channel symmetric qint8 weights.
const Q::QConfig ptq{
    .weight_observer = {.kind = Q::ObserverKind::per_channel_min_max,
                        .scheme = {.dtype = Q::QuantDType::qint8(), .mode = Q::QMode::symmetric, .per_channel = true}},
    .act_observer = {.kind = Q::ObserverKind::min_max, .scheme = {.dtype = Q::QuantDType::quint8()}}};

struct Block : tmod::Module {
  M::Conv2d conv{4, 4, 3, {.padding = 1}};
  M::ReLU relu;
  TM_MODULE(Block, conv, relu)
  auto forward(const auto& x) const { return relu(conv(x) + x); }
};

struct Net : tmod::Module {
  M::Conv2d conv1{3, 4, 3, {.padding = 1, .bias = false}};
  M::BatchNorm2d bn1{4};
  M::ReLU relu;
  Block block;
  M::MaxPool2d pool{2};
  M::Flatten flatten{1};
  M::Linear fc{4 * 3 * 3, 5};
  TM_MODULE(Net, conv1, bn1, relu, block, pool, flatten, fc)
  auto forward(const auto& x) const { return fc(flatten(pool(block(relu(bn1(conv1(x))))))); }
};

struct Plain : tmod::Module {
  M::ReLU relu;
  TM_MODULE(Plain, relu)
  auto forward(const auto& x) const { return relu(x) * 2; }
};

Net make_net() {
  Net n;
  n.bn1.running_mean = tmod::uniform({4}, -0.5f, 0.5f, 3);
  n.bn1.running_var = tmod::uniform({4}, 0.5f, 2.f, 4);
  n.bn1.weight = tmod::Parameter(tmod::uniform({4}, 0.5f, 1.5f, 5));
  n.bn1.bias = tmod::Parameter(tmod::uniform({4}, -0.2f, 0.2f, 6));
  n.eval();
  return n;
}

const Tensor example = tmod::uniform({2, 3, 6, 6}, -1.f, 1.f, 7);
std::vector<Tensor> batches() { return {example, tmod::uniform({2, 3, 6, 6}, -2.f, 1.5f, 8)}; }

Tensor weight_fq(const Tensor& w) {
  Q::PerChannelMinMaxObserver o;
  o.observe(w);
  const Q::QParamsTensors q = o.qparams();
  return F::fake_quantize_per_channel(w, q.scale, q.zero_point, 0, -128, 127);
}

Tensor act_fq(const Tensor& x, const tmod::QParams& q) { return F::fake_quantize(x, q.scale, q.zero_point, 0, 255); }

}  // namespace

TEST_CASE("quant::prepare: observers after BN folding, on inputs, conv/linear outputs (after relu), adds, weights") {
  const Net net = make_net();
  const tmod::TracedModule traced = tmod::trace_module(net, example);
  const std::string before = text(traced);
  tmod::TracedModule p = Q::prepare(traced, ptq);
  CHECK(text(traced) == before);  // the input is left unchanged
  const std::string printed = text(p);
  CAPTURE(printed);
  CHECK(printed.find("BatchNorm2d") == std::string::npos);
  // input; conv1's weight and relu; the block's conv weight and output (an add reads it) and its
  // add + relu; fc's weight and output: 8
  CHECK(count(printed, "-> (FakeQuantize)") == 8);
  CHECK(printed.find("x_fake_quant_out = x_fake_quant(x, )") != std::string::npos);
  CHECK(printed.find("relu_out_fake_quant(relu_out, )") != std::string::npos);  // after conv1's relu
  CHECK(printed.find("nn.conv2d(") != std::string::npos);
  CHECK(printed.find("nn.linear(") != std::string::npos);
  CHECK(printed.find("conv1_weight_fake_quant_out = conv1_weight_fake_quant(weight, )") != std::string::npos);
  CHECK(printed.find("conv1_out = nn.conv2d(x_fake_quant_out, conv1_weight_fake_quant_out, ") != std::string::npos);
  CHECK(printed.find("conv1 = getattr(self, \"conv1\")") == std::string::npos);  // the call became nn.conv2d
  CHECK(count(printed, "fake_quant") > 0);
  // Nothing observes the pooling and flatten outputs.
  CHECK(printed.find("pool_out_fake_quant") == std::string::npos);
  CHECK(printed.find("flatten_out_fake_quant") == std::string::npos);
}

TEST_CASE("quant::prepare: calibration updates the observers; the fake-quantized forward equals the hand-written one") {
  Net net = make_net();
  tmod::TracedModule p = Q::prepare(tmod::trace_module(net, example), ptq);
  Q::disable_fake_quant(p);
  for (const Tensor& b : batches()) (void)p(b);
  Q::enable_fake_quant(p);
  Q::disable_observer(p);

  // The observers against the float forward, by hand (BN folded as FuseConvBn folds it).
  Q::MinMaxObserver in({.dtype = Q::QuantDType::quint8()}), a1 = in, c = in, a2 = in, a3 = in;
  const auto [folded_w, folded_b] = F::fold_conv_bn(net.conv1.weight, Tensor(),
                                        {.mean = &net.bn1.running_mean, .var = &net.bn1.running_var,
                                         .gamma = &net.bn1.weight, .beta = &net.bn1.bias, .eps = net.bn1.eps});
  const Tensor w1 = folded_w, b1 = folded_b;  // lambdas capture variables, not structured bindings (clang 14)
  const auto conv1 = [&](const Tensor& x) { return F::conv2d(x, w1, b1, {.padding = 1}); };
  const auto block = [&](const Tensor& x) { return F::conv2d(x, net.block.conv.weight, net.block.conv.bias, {.padding = 1}); };
  for (const Tensor& b : batches()) {
    in.observe(b);
    const Tensor r = F::relu(conv1(b));
    a1.observe(r);
    c.observe(block(r));
    const Tensor s = F::relu(block(r) + r);
    a2.observe(s);
    a3.observe(net.fc(F::flatten(F::max_pool2d(s, 2), 1)));
  }
  const std::vector<Q::ObservedTensor> q = Q::qparams_of(p);
  REQUIRE(q.size() == 5);
  CHECK(q[0].qparams.scale == doctest::Approx(in.qparams().scale).epsilon(1e-6));
  CHECK(q[1].qparams.scale == doctest::Approx(a1.qparams().scale).epsilon(1e-5));
  CHECK(q[2].qparams.scale == doctest::Approx(c.qparams().scale).epsilon(1e-5));
  CHECK(q[3].qparams.scale == doctest::Approx(a2.qparams().scale).epsilon(1e-5));
  CHECK(q[4].qparams.scale == doctest::Approx(a3.qparams().scale).epsilon(1e-5));
  CHECK(q[3].input->name() == "relu_out");  // observed after the relu that follows the add
  CHECK(q[0].qparams.zero_point == in.qparams().zero_point);
  CHECK(q[0].qparams.dtype_meta == "quint8");

  // The fake-quantized forward, by hand, with the qparams the graph's observers hold.
  const Tensor x = example;
  Tensor h = act_fq(x, q[0].qparams);
  h = act_fq(F::relu(F::conv2d(h, weight_fq(w1), b1, {.padding = 1})), q[1].qparams);
  const Tensor cq = act_fq(F::conv2d(h, weight_fq(net.block.conv.weight), net.block.conv.bias, {.padding = 1}), q[2].qparams);
  h = act_fq(F::relu(cq + h), q[3].qparams);
  h = act_fq(F::linear(F::flatten(F::max_pool2d(h, 2), 1), weight_fq(net.fc.weight), net.fc.bias), q[4].qparams);
  const Tensor y = p(x).tensor();
  const double scale = q[4].qparams.scale;
  for (std::int64_t i = 0; i < y.numel(); ++i) CHECK(std::abs(y.data<float>()[i] - h.data<float>()[i]) <= scale * 1.001);
  CHECK(std::count_if(y.data<float>(), y.data<float>() + y.numel(),
                      [&, i = 0](float v) mutable { return v == h.data<float>()[i++]; }) >= y.numel() * 9 / 10);

  // qparams on the nodes and in the printed graph; save -> load keeps them and the calibration.
  // 5 observed tensors, each with its FakeQuantize output; the block's call, pool and flatten share
  CHECK(Q::annotate_qparams(p) == 13);
  const std::string printed = text(p);
  CAPTURE(printed);
  CHECK(printed.find("  # x_fake_quant_out: quint8(scale=") != std::string::npos);
  CHECK(count(printed, ": quint8(scale=") == 12);  // all but the input x, which prints in the header
  CHECK(printed.find("pool_out = pool(block_out, )  # pool_out: quint8(scale=") != std::string::npos);
  const tmod::TracedModule loaded = round_trip(p);
  CHECK(text(loaded) == printed);
  CHECK(same_bits(loaded(x).tensor(), y));
  CHECK(Q::qparams_of(loaded)[2].qparams == q[2].qparams);
}

TEST_CASE("quant::prepare: per-name and per-type configs, disable_quantize") {
  Net net = make_net();
  net.block.disable_quantize();
  CHECK(net.block.conv.quantize_disabled());
  const tmod::TracedModule t = tmod::trace_module(net, example);
  const std::string printed = text(Q::prepare(t, ptq));
  CAPTURE(printed);
  CHECK(count(printed, "-> (FakeQuantize)") == 5);  // input, conv1 + weight, fc + weight; none in the block

  Net plain = make_net();
  const tmod::TracedModule u = tmod::trace_module(plain, example);
  const std::string by_name = text(Q::prepare(u, ptq, {.module_name = {{"fc", std::nullopt}}}));
  CHECK(by_name.find("fc_out = fc(") != std::string::npos);  // left float: still the module call
  CHECK(count(by_name, "-> (FakeQuantize)") == 6);
  const std::string by_type = text(Q::prepare(u, ptq, {.module_type = {{"Conv2d", std::nullopt}, {"Block", std::nullopt}}}));
  CHECK(count(by_type, "-> (FakeQuantize)") == 3);  // input, fc + weight
  // A name wins over a type.
  const std::string both = text(Q::prepare(u, ptq, {.module_name = {{"block", ptq}}, .module_type = {{"Block", std::nullopt}}}));
  CHECK(count(both, "-> (FakeQuantize)") == 8);
}

TEST_CASE("quant::prepare: bad input names what is wrong and changes nothing") {
  Plain plain;
  const tmod::TracedModule t = tmod::trace_module(plain, example);
  CHECK_THROWS_WITH_AS((void)Q::prepare(t, ptq), doctest::Contains("has nothing to quantize"), tmod::value_error);
  CHECK_THROWS_WITH_AS((void)Q::qparams_of(t), doctest::Contains("no FakeQuantize call"), tmod::value_error);

  Net net = make_net();
  const tmod::TracedModule traced = tmod::trace_module(net, example);
  tmod::TracedModule p = Q::prepare(traced, ptq);
  const std::string before = text(p);
  CHECK_THROWS_WITH_AS((void)Q::qparams_of(p), doctest::Contains("'x' (%"), tmod::value_error);
  CHECK_THROWS_WITH_AS(Q::annotate_qparams(p), doctest::Contains("saw no data"), tmod::value_error);
  CHECK(text(p) == before);

  Q::QConfig wide = ptq;
  wide.act_observer.scheme.dtype = {"quint8", 0, 300, false};
  CHECK_THROWS_WITH_AS((void)Q::prepare(traced, wide), doctest::Contains("not an 8-bit range"), tmod::value_error);
  Q::QConfig empty = ptq;
  empty.weight_observer.scheme.dtype = {"qint8", 5, 5, true};
  CHECK_THROWS_AS((void)Q::prepare(traced, ptq, {.module_name = {{"fc", empty}}}), tmod::value_error);

  CHECK_THROWS_WITH_AS(Q::check_qparams({"quint8", 0.f, 3}, Q::QuantDType::quint8(), "'relu_out'"),
                       doctest::Contains("'relu_out'"), tmod::value_error);
  CHECK_THROWS_WITH_AS(Q::check_qparams({"quint8", 0.1f, 256}, Q::QuantDType::quint8(), "'relu_out'"),
                       doctest::Contains("outside [0, 255]"), tmod::value_error);
  CHECK_NOTHROW(Q::check_qparams({"quint8", 0.1f, 255}, Q::QuantDType::quint8(), "'relu_out'"));
}

}  // namespace tmod_test_nn_quant_prepare
