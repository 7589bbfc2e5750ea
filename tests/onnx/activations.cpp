// ONNX export -> import of the activations: gelu as its formula over Erf or Tanh, silu as
// Mul(x, Sigmoid(x)), hardsigmoid as HardSigmoid(1/6, 1/2), hardswish as Mul(x, HardSigmoid(x)),
// leaky_relu as LeakyRelu; the exported model passes ONNX's checker and the imported one computes
// what eager mode does. HardSwish nodes import as hardswish.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <string>

namespace tmod_test_onnx_activations {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
using tmod::Tensor;

/// |a - b| <= 1e-5 * max(|b|, 1) everywhere: the ONNX forms round in other places, and gelu's formula
/// loses relative accuracy where 1 + erf (or 1 + tanh) cancels, for x well below 0 (absolute error
/// about 1e-7 there).
bool close(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const float x = a.data<float>()[i], y = b.data<float>()[i];
    if (!(std::abs(x - y) <= 1e-5f * std::max(std::abs(y), 1.f))) return false;
  }
  return true;
}

struct Funcs : tmod::Module {
  TM_MODULE(Funcs)
  auto forward(const auto& x) const {
    const auto chain = F::leaky_relu(F::hardswish(F::silu(x) * 0.5f), 0.2) + F::hardsigmoid(x);
    return F::gelu(chain, {.approximate = "tanh"}) + F::gelu(x);
  }
};

struct Mods : tmod::Module {
  M::GELU gelu;
  M::SiLU silu;
  M::Hardswish hardswish;
  M::Hardsigmoid hardsigmoid;
  M::LeakyReLU leaky{0.125};
  TM_MODULE(Mods, gelu, silu, hardswish, hardsigmoid, leaky)
  auto forward(const auto& x) const { return gelu(leaky(hardswish(silu(x)))) + hardsigmoid(x); }
};

/// One unary node: what F::hardsigmoid exports, retyped.
struct One : tmod::Module {
  TM_MODULE(One)
  auto forward(const auto& x) const { return F::hardsigmoid(x); }
};

/// leaky_relu with a per-channel slope tensor (a constant of the trace).
struct Channels : tmod::Module {
  Tensor slope = tmod::tensor({0.5f, 0.25f, 0.125f});
  TM_MODULE(Channels)
  auto forward(const auto& x) const { return F::leaky_relu(x, slope); }
};

std::map<std::string, int> op_counts(const tmod::onnx::proto::ModelProto& m) {
  std::map<std::string, int> c;
  for (const auto& n : m.graph().node()) ++c[n.op_type()];
  return c;
}

const Tensor input = tmod::uniform({2, 37}, -5.f, 5.f, 41);

}  // namespace

TEST_CASE("onnx: the activation functions export at opset 13 and import computing what eager mode does") {
  Funcs net;
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input), {.opset = 13});
  CHECK_NOTHROW(tmod::onnx::proto::checker::check_model(model));
  const auto ops = op_counts(model);
  CHECK(ops.at("Erf") == 1);
  CHECK(ops.at("Tanh") == 1);
  CHECK(ops.at("Sigmoid") == 1);
  CHECK(ops.at("HardSigmoid") == 2);
  CHECK(ops.at("LeakyRelu") == 1);
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  CHECK(close(imported(input).tensor(), net.forward(input)));
}

TEST_CASE("onnx: the activation modules export and import with their config") {
  Mods net;
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input), {.opset = 13});
  CHECK_NOTHROW(tmod::onnx::proto::checker::check_model(model));
  const auto ops = op_counts(model);
  CHECK(ops.at("Erf") == 1);
  CHECK(ops.at("LeakyRelu") == 1);
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  CHECK(close(imported(input).tensor(), net.forward(input)));
}

TEST_CASE("onnx import: a HardSwish node (opset 14) imports as hardswish") {
  One net;
  auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input), {.opset = 13});
  auto* node = model.mutable_graph()->mutable_node(0);
  REQUIRE(node->op_type() == "HardSigmoid");
  node->clear_attribute();
  node->set_op_type("HardSwish");
  model.mutable_opset_import(0)->set_version(14);
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  std::ostringstream os;
  os << imported.graph();
  CHECK(os.str().find("nn.hardswish(") != std::string::npos);
  const Tensor got = imported(input).tensor();
  CHECK(std::memcmp(got.data<float>(), F::hardswish(input).data<float>(), got.nbytes()) == 0);
}

TEST_CASE("onnx: leaky_relu with a slope tensor exports as PRelu; one that widens the input is refused") {
  Channels net;
  const Tensor x = tmod::uniform({2, 3}, -1.f, 1.f, 43);
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, x), {.opset = 13});
  CHECK_NOTHROW(tmod::onnx::proto::checker::check_model(model));
  CHECK(op_counts(model).at("PRelu") == 1);
  const Tensor column = tmod::uniform({3}, -1.f, 1.f, 44);
  net.slope = tmod::tensor({{0.5f}, {0.25f}});  // (2, 1) against (3,): the result is (2, 3)
  const tmod::TracedModule wide = tmod::trace_module(net, column);
  try {
    (void)tmod::onnx::to_onnx(wide, {.opset = 13});
    FAIL("no error");
  } catch (const tmod::value_error& e) {
    CAPTURE(e.what());
    CHECK(std::string(e.what()).find("PRelu") != std::string::npos);
  }
}

}  // namespace tmod_test_onnx_activations
