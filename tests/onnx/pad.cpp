// ONNX export -> import of pad: one Pad node per call (pads as an int64 input over every axis,
// constant_value when nonzero, mode reflect or edge), which passes ONNX's checker and imports
// computing what eager mode does; Pad's attribute form (before opset 11) and all-zero pads import.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tmod_test_onnx_pad {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace proto = tracemod::onnx::proto;
using tmod::Tensor;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

struct Padded : tmod::Module {
  TM_MODULE(Padded)
  auto forward(const auto& x) const {
    const auto a = F::pad(x, {1, 1, 1, 1});
    const auto b = F::pad(F::relu(a) - 0.25f, {2, 1, 0, 2}, "reflect");
    const auto c = F::pad(b, {1, 0}, "constant", 1.5);
    return F::avg_pool2d(F::pad(c, {0, 1}, "replicate"), 3, 1);
  }
};

struct One : tmod::Module {
  F::int_list pads;
  TM_MODULE(One)
  auto forward(const auto& x) const { return F::pad(x, pads, "constant", 1.5); }
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

const Tensor input = tmod::uniform({2, 3, 5, 6}, -1.f, 1.f, 61);

}  // namespace

TEST_CASE("onnx: pad exports as Pad in each mode and imports computing what eager mode does") {
  Padded net;
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input), {.opset = 13});
  CHECK_NOTHROW(proto::checker::check_model(model));
  CHECK(op_counts(model).at("Pad") == 4);
  std::vector<std::string> modes;
  for (const auto& n : model.graph().node())
    if (n.op_type() == "Pad") {
      CHECK(n.input_size() == (modes.size() == 2 ? 3 : 2));  // constant_value only for 1.5
      std::string mode = "constant";
      for (const auto& a : n.attribute())
        if (a.name() == "mode") mode = a.s();
      modes.push_back(mode);
    }
  CHECK(modes == std::vector<std::string>{"constant", "reflect", "constant", "edge"});
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  CHECK(same_bits(imported(input).tensor(), net.forward(input)));
  const std::string printed = text(imported);
  CAPTURE(printed);
  CHECK(printed.find("reflect") != std::string::npos);
  CHECK(printed.find("replicate") != std::string::npos);
}

TEST_CASE("onnx import: Pad's attribute form (opset 10) and all-zero pads") {
  One net;
  net.pads = {2, 0, 1, 3};
  auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input), {.opset = 13});
  auto* node = model.mutable_graph()->mutable_node(0);
  REQUIRE(node->op_type() == "Pad");
  REQUIRE(node->input_size() == 3);
  const std::string x = node->input(0);
  node->clear_input();
  node->add_input(x);
  auto* pads = node->add_attribute();
  pads->set_name("pads");
  pads->set_type(proto::AttributeProto::INTS);
  for (std::int64_t v : {0, 0, 1, 2, 0, 0, 3, 0}) pads->add_ints(v);  // (N, C, H, W) begins, then ends
  auto* value = node->add_attribute();
  value->set_name("value");
  value->set_type(proto::AttributeProto::FLOAT);
  value->set_f(1.5f);
  model.mutable_opset_import(0)->set_version(10);
  model.mutable_graph()->clear_initializer();
  const tmod::TracedModule old = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  CHECK(same_bits(old(input).tensor(), net.forward(input)));

  net.pads = {0, 0, 0, 0};
  const auto zero = tmod::onnx::to_onnx(tmod::trace_module(net, input), {.opset = 13});
  REQUIRE(op_counts(zero).at("Pad") == 1);
  const tmod::TracedModule same = tmod::onnx::import_model(zero, {.dims = {{"batch", 2}}});
  CHECK(text(same).find("nn.pad") == std::string::npos);
  CHECK(same_bits(same(input).tensor(), input));
}

}  // namespace tmod_test_onnx_pad
