// ONNX export -> import of the reductions: sum as ReduceSum with its axes an int64 initializer input,
// mean, max and min as ReduceMean, ReduceMax and ReduceMin with an axes attribute (opsets 13 to 17);
// the exported model passes ONNX's checker and the imported one computes what eager mode does. An
// older ReduceSum (axes an attribute), noop_with_empty_axes and no axes at all import too.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <sstream>
#include <string>

namespace tmod_test_onnx_reduce {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace proto = tracemod::onnx::proto;
using tmod::Tensor;

struct Net : tmod::Module {
  TM_MODULE(Net)
  auto forward(const auto& x) const {
    const auto y = x - F::mean(x, {2, 3}, true);
    const auto z = F::sum(y * y, {-1}) + F::max(y, {3}) - F::min(x, {-1}, false);
    return F::mean(z, {1});
  }
};

/// A sum over every axis (no axes written), kept as (1, 1, 1, 1).
struct All : tmod::Module {
  TM_MODULE(All)
  auto forward(const auto& x) const { return F::sum(x, {.keepdims = true}); }
};

struct Sum : tmod::Module {
  TM_MODULE(Sum)
  auto forward(const auto& x) const { return F::sum(x, {1, 2}); }
};

std::map<std::string, int> op_counts(const proto::ModelProto& m) {
  std::map<std::string, int> c;
  for (const auto& n : m.graph().node()) ++c[n.op_type()];
  return c;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

std::string text(const tmod::TracedModule& m) {
  std::ostringstream os;
  os << m.graph();
  return os.str();
}

const Tensor input = tmod::uniform({2, 3, 5, 7}, -4.f, 4.f, 23);

}  // namespace

TEST_CASE("onnx: the reductions export at opsets 13 and 17 and import computing what eager mode does") {
  Net net;
  const Tensor eager = net.forward(input);
  for (std::int64_t opset : {13, 17}) {
    CAPTURE(opset);
    const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input), {.opset = opset});
    CHECK_NOTHROW(proto::checker::check_model(model));
    const auto ops = op_counts(model);
    CHECK(ops.at("ReduceMean") == 2);
    CHECK(ops.at("ReduceSum") == 1);
    CHECK(ops.at("ReduceMax") == 1);
    CHECK(ops.at("ReduceMin") == 1);
    for (const auto& n : model.graph().node()) {
      if (n.op_type() == "ReduceSum") {
        CHECK(n.input_size() == 2);  // the axes, an initializer
        CHECK(n.attribute_size() == 1);
      } else if (n.op_type().starts_with("Reduce")) {
        CHECK(n.input_size() == 1);
        CHECK(n.attribute_size() == 2);  // axes and keepdims
      }
    }
    const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
    const std::string printed = text(imported);
    CAPTURE(printed);
    CHECK(printed.find("math.mean(") != std::string::npos);
    CHECK(printed.find("(2, 3), True") != std::string::npos);
    CHECK(printed.find("math.sum(") != std::string::npos);
    CHECK(same_bits(imported(input).tensor(), eager));
  }
}

TEST_CASE("onnx: a sum over every axis exports without axes and imports as one") {
  All net;
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input));
  CHECK_NOTHROW(proto::checker::check_model(model));
  REQUIRE(model.graph().node_size() == 1);
  CHECK(model.graph().node(0).input_size() == 1);
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  CHECK(imported(input).tensor().shape() == tmod::Shape{1, 1, 1, 1});
  CHECK(same_bits(imported(input).tensor(), net.forward(input)));
}

TEST_CASE("onnx import: ReduceSum's axes as an attribute before opset 13, and noop_with_empty_axes") {
  Sum net;
  const Tensor eager = net.forward(input);
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input));
  REQUIRE(model.graph().node_size() == 1);
  REQUIRE(model.graph().node(0).input_size() == 2);

  proto::ModelProto old = model;  // opset 11: axes an attribute
  proto::NodeProto& n = *old.mutable_graph()->mutable_node(0);
  n.mutable_input()->RemoveLast();
  old.mutable_graph()->clear_initializer();
  proto::AttributeProto& axes = *n.add_attribute();
  axes.set_name("axes");
  axes.set_type(proto::AttributeProto::INTS);
  axes.add_ints(-3);
  axes.add_ints(2);
  old.mutable_opset_import(0)->set_version(11);
  CHECK_NOTHROW(proto::checker::check_model(old));
  CHECK(same_bits(tmod::onnx::import_model(old, {.dims = {{"batch", 2}}})(input).tensor(), eager));

  // From opset 13 on an axes attribute is refused (by ONNX's checker first); no axes input with noop_with_empty_axes is the identity.
  old.mutable_opset_import(0)->set_version(13);
  CHECK_THROWS_WITH_AS((void)tmod::onnx::import_model(old), doctest::Contains("axes"), tmod::error);
  proto::ModelProto noop = model;
  proto::NodeProto& m = *noop.mutable_graph()->mutable_node(0);
  m.mutable_input()->RemoveLast();
  noop.mutable_graph()->clear_initializer();
  proto::AttributeProto& flag = *m.add_attribute();
  flag.set_name("noop_with_empty_axes");
  flag.set_type(proto::AttributeProto::INT);
  flag.set_i(1);
  noop.mutable_graph()->mutable_output(0)->CopyFrom(noop.graph().input(0));
  noop.mutable_graph()->mutable_output(0)->set_name(m.output(0));
  CHECK_NOTHROW(proto::checker::check_model(noop));
  CHECK(same_bits(tmod::onnx::import_model(noop, {.dims = {{"batch", 2}}})(input).tensor(), input));
}

}  // namespace tmod_test_onnx_reduce
