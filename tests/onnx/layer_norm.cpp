// ONNX export -> import of layer_norm and group_norm (functions and the LayerNorm and GroupNorm
// modules): LayerNormalization at opset 17, the ReduceMean chain below it and for group_norm; every
// model passes ONNX's checker and imports computing what eager mode does (within rounding, where
// the chain replaces the kernel). LayerNormalization's forms: axis, epsilon, no bias, stash_type.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>

namespace tmod_test_onnx_layer_norm {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
namespace proto = tracemod::onnx::proto;
using tmod::Tensor;

struct Norms : tmod::Module {
  tmod::Parameter w{tmod::uniform({5, 6}, 0.5f, 1.5f, 71)};
  tmod::Parameter b{tmod::uniform({5, 6}, -1.f, 1.f, 72)};
  tmod::Parameter gb{tmod::uniform({4}, -1.f, 1.f, 73)};
  M::LayerNorm ln{6};
  M::GroupNorm gn{2, 4, 1e-3};
  TM_MODULE(Norms, w, b, gb, ln, gn)
  auto forward(const auto& x) const {
    const auto a = F::layer_norm(x, {5, 6}, w, b);
    const auto c = F::group_norm(F::relu(a), 4, tmod::none, gb, 1e-4);
    const auto d = F::layer_norm(c - 0.5f, {6}, tmod::none, tmod::none, 1e-3);
    return gn(ln(d + F::group_norm(x, 1)));
  }
};

/// layer_norm over the last two axes, with a weight and no bias.
struct One : tmod::Module {
  tmod::Parameter w{tmod::uniform({4, 5}, 0.5f, 1.5f, 76)};
  TM_MODULE(One, w)
  auto forward(const auto& x) const { return F::layer_norm(x, {4, 5}, w, tmod::none, 0.0625); }
};

std::map<std::string, int> op_counts(const proto::ModelProto& m) {
  std::map<std::string, int> c;
  for (const auto& n : m.graph().node()) ++c[n.op_type()];
  return c;
}

std::string text(const tmod::TracedModule& m) {
  std::ostringstream os;
  os << m.graph();
  return os.str();
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double d = 0;
  for (std::size_t i = 0; i < a.values<float>().size(); ++i)
    d = std::max(d, static_cast<double>(std::abs(a.values<float>()[i] - b.values<float>()[i])));
  return d;
}

const Tensor input = tmod::uniform({2, 4, 5, 6}, -2.f, 2.f, 74);

}  // namespace

TEST_CASE("onnx: layer_norm exports as LayerNormalization at opset 17 and imports as layer_norm") {
  Norms net;
  net.ln.bias = tmod::uniform({6}, -1.f, 1.f, 75);
  const Tensor eager = net.forward(input);
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input), {.opset = 17});
  CHECK_NOTHROW(proto::checker::check_model(model));
  const auto counts = op_counts(model);
  CHECK(counts.at("LayerNormalization") == 3);
  CHECK(counts.at("ReduceMean") == 6);  // the three group_norm calls, two each
  for (const auto& n : model.graph().node())
    if (n.op_type() == "LayerNormalization") CHECK(n.input_size() >= 2);  // Scale (ones for no weight)
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  const std::string printed = text(imported);
  CAPTURE(printed);
  CHECK(printed.find("nn.layer_norm(") != std::string::npos);
  CHECK(max_abs_diff(imported(input).tensor(), eager) < 1e-5);
}

TEST_CASE("onnx: below opset 17 layer_norm is written out, and the chain computes it") {
  Norms net;
  const Tensor eager = net.forward(input);
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input), {.opset = 13});
  CHECK_NOTHROW(proto::checker::check_model(model));
  const auto counts = op_counts(model);
  CHECK(counts.count("LayerNormalization") == 0);
  CHECK(counts.at("ReduceMean") == 12);
  CHECK(counts.at("Sqrt") == 6);
  CHECK(counts.count("Identity") == 0);  // a call without weight and bias ends at its Div
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  CHECK(max_abs_diff(imported(input).tensor(), eager) < 1e-5);
  CHECK(text(imported).find("nn.layer_norm") == std::string::npos);
  // FuseLayerNorm finds the three layer norms again; group_norm spreads its statistics to the channels
  // before subtracting them, so its chain stays.
  const tmod::TracedModule fused = tmod::optimize(imported, {"FuseLayerNorm"});
  const std::string printed = text(fused);
  std::size_t fused_calls = 0;
  for (std::size_t at = printed.find("nn.layer_norm("); at != std::string::npos; at = printed.find("nn.layer_norm(", at + 1))
    ++fused_calls;
  CHECK(fused_calls == 3);
  CHECK(max_abs_diff(fused(input).tensor(), eager) < 1e-5);
  // group_norm's reshapes fix no batch extent (0 copies it), so the model runs at any batch size
  std::map<std::string, std::int64_t> first_extent;
  for (const auto& t : model.graph().initializer())
    if (t.data_type() == proto::TensorProto::INT64 && t.int64_data_size() > 0) first_extent[t.name()] = t.int64_data(0);
  int reshapes = 0;
  for (const auto& n : model.graph().node())
    if (n.op_type() == "Reshape" && first_extent.count(n.input(1)) != 0 && first_extent.at(n.input(1)) != 4) {
      ++reshapes;  // (N, G, -1) and (N, C, 1, 1); the weight's and bias' (C, 1, 1) start with C = 4
      CHECK(first_extent.at(n.input(1)) == 0);
    }
  CHECK(reshapes == 3 * 3);  // per group_norm: x grouped, its mean and its std spread to the channels
}

TEST_CASE("onnx import: LayerNormalization's axis, epsilon, missing bias and stash_type") {
  One net;
  const Tensor x = tmod::uniform({3, 4, 5}, -1.f, 1.f, 77);
  auto model = tmod::onnx::to_onnx(tmod::trace_module(net, x), {.opset = 17});
  REQUIRE(op_counts(model).at("LayerNormalization") == 1);
  auto* node = model.mutable_graph()->mutable_node(0);
  REQUIRE(node->input_size() == 2);
  for (auto& a : *node->mutable_attribute())
    if (a.name() == "axis") a.set_i(-2);  // the same axes, counted from the end
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 3}}});
  const std::string printed = text(imported);
  CAPTURE(printed);
  CHECK(printed.find("(4, 5), 0.0625") != std::string::npos);
  CHECK(max_abs_diff(imported(x).tensor(), net.forward(x)) == 0);

  auto* stash = node->add_attribute();
  stash->set_name("stash_type");
  stash->set_type(proto::AttributeProto::INT);
  stash->set_i(0);
  CHECK_THROWS_WITH_AS((void)tmod::onnx::import_model(model, {.dims = {{"batch", 3}}}), doctest::Contains("stash_type 0"),
                       tmod::error);
}

}  // namespace tmod_test_onnx_layer_norm
