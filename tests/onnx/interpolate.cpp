// ONNX export -> import of interpolate and M::Upsample: one Resize node per call (scales for a scale
// factor, sizes from the input's N and C for a size; nearest as asymmetric + floor, bilinear as
// half_pixel or align_corners), which passes ONNX's checker and imports computing what eager mode
// does bit for bit; Resize and Upsample nodes written by hand import where their attributes mean
// PyTorch's rule and are refused, naming the attribute, where they do not.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace tmod_test_onnx_interpolate {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
namespace proto = tracemod::onnx::proto;
using tmod::Tensor;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

struct Resized : tmod::Module {
  M::Upsample up{{.scale_factor = 2.0, .mode = "bilinear", .align_corners = true}};
  TM_MODULE(Resized, up)
  auto forward(const auto& x) const {
    const auto a = F::interpolate(x, std::nullopt, 1.5);
    const auto b = F::interpolate(F::relu(a), F::pair2{11, 13}, std::nullopt, "bilinear");
    const auto c = F::interpolate(b - 0.25f, F::pair2{9, 7}, std::nullopt, "bilinear", true);
    const auto d = F::interpolate(c, F::pair2{4, 5});
    return up(F::interpolate(d, std::nullopt, 0.5, "bilinear"));
  }
};

/// One interpolate call with the given params.
struct One : tmod::Module {
  F::interpolate_params p;
  TM_MODULE(One)
  auto forward(const auto& x) const { return F::interpolate(x, p); }
};

std::map<std::string, std::string> string_attributes(const proto::NodeProto& n) {
  std::map<std::string, std::string> a;
  for (const auto& attr : n.attribute())
    if (attr.type() == proto::AttributeProto::STRING) a[attr.name()] = attr.s();
  return a;
}

std::vector<const proto::NodeProto*> resizes(const proto::ModelProto& m) {
  std::vector<const proto::NodeProto*> r;
  for (const auto& n : m.graph().node())
    if (n.op_type() == "Resize") r.push_back(&n);
  return r;
}

void set_string(proto::NodeProto& n, const std::string& name, const std::string& value) {
  for (auto& a : *n.mutable_attribute())
    if (a.name() == name) return a.set_s(value);
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(proto::AttributeProto::STRING);
  a->set_s(value);
}

const Tensor input = tmod::uniform({2, 3, 5, 6}, -1.f, 1.f, 91);

}  // namespace

TEST_CASE("onnx: interpolate and Upsample export as Resize and import computing what eager mode does") {
  Resized net;
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input), {.opset = 13});
  CHECK_NOTHROW(proto::checker::check_model(model));
  const auto r = resizes(model);
  REQUIRE(r.size() == 6);
  const std::vector<std::string> modes{"nearest", "linear", "linear", "nearest", "linear", "linear"};
  const std::vector<std::string> coordinates{"asymmetric", "half_pixel", "align_corners", "asymmetric", "half_pixel",
                                             "align_corners"};
  for (std::size_t i = 0; i < r.size(); ++i) {
    CAPTURE(i);
    const auto a = string_attributes(*r[i]);
    CHECK(a.at("mode") == modes[i]);
    CHECK(a.at("coordinate_transformation_mode") == coordinates[i]);
    if (modes[i] == "nearest") CHECK(a.at("nearest_mode") == "floor");
    CHECK(r[i]->input(1).empty());  // no roi
    const bool sized = i == 1 || i == 2 || i == 3 || i == 5;  // align_corners exports its output size
    CHECK(r[i]->input_size() == (sized ? 4 : 3));
  }
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  CHECK(same_bits(imported(input).tensor(), net.forward(input)));
  std::ostringstream printed;
  printed << imported.graph();
  CHECK(printed.str().find("nn.interpolate(") != std::string::npos);
  // the sizes follow the input's batch
  const tmod::TracedModule four = tmod::onnx::import_model(model, {.dims = {{"batch", 4}}});
  const Tensor x4 = tmod::uniform({4, 3, 5, 6}, -1.f, 1.f, 92);
  CHECK(same_bits(four(x4).tensor(), net.forward(x4)));
}

TEST_CASE("onnx import: Resize's attributes that mean PyTorch's rules import, the others are refused by name") {
  One scaled;
  scaled.p = {.scale_factor = 2.0};
  const auto base = tmod::onnx::to_onnx(tmod::trace_module(scaled, input), {.opset = 13});
  const auto edit = [&](auto&& change) {
    proto::ModelProto m = base;
    for (auto& n : *m.mutable_graph()->mutable_node())
      if (n.op_type() == "Resize") change(n);
    return m;
  };
  const auto import = [](const proto::ModelProto& m) { return tmod::onnx::import_model(m, {.dims = {{"batch", 2}}}); };
  const Tensor eager = scaled.forward(input);
  // half_pixel + round_prefer_floor picks the same pixels as floor(dst / 2) on a whole factor
  const auto half = edit([](proto::NodeProto& n) {
    set_string(n, "coordinate_transformation_mode", "half_pixel");
    set_string(n, "nearest_mode", "round_prefer_floor");
  });
  CHECK(same_bits(import(half)(input).tensor(), eager));
  const auto cubic = edit([](proto::NodeProto& n) { set_string(n, "mode", "cubic"); });
  CHECK_THROWS_WITH_AS(import(cubic), doctest::Contains("attribute mode 'cubic'"), tmod::value_error);
  const auto tf = edit([](proto::NodeProto& n) { set_string(n, "coordinate_transformation_mode", "tf_crop_and_resize"); });
  CHECK_THROWS_WITH_AS(import(tf), doctest::Contains("coordinate_transformation_mode 'tf_crop_and_resize'"),
                       tmod::value_error);
  const auto ceil = edit([](proto::NodeProto& n) { set_string(n, "nearest_mode", "ceil"); });
  CHECK_THROWS_WITH_AS(import(ceil), doctest::Contains("nearest_mode 'ceil'"), tmod::value_error);

  // pytorch_half_pixel on an output extent of 1 reads pixel 0, PyTorch's bilinear the centre
  One row;
  row.p = {.size = F::pair2{1, 4}, .mode = "bilinear"};
  const auto rows = tmod::onnx::to_onnx(tmod::trace_module(row, input), {.opset = 13});
  CHECK(same_bits(import(rows)(input).tensor(), row.forward(input)));
  proto::ModelProto pytorch = rows;
  for (auto& n : *pytorch.mutable_graph()->mutable_node())
    if (n.op_type() == "Resize") set_string(n, "coordinate_transformation_mode", "pytorch_half_pixel");
  CHECK_THROWS_WITH_AS(import(pytorch), doctest::Contains("'pytorch_half_pixel' on an output extent of 1"),
                       tmod::value_error);
}

TEST_CASE("onnx import: Upsample (opset 9) is nearest with floor") {
  One scaled;
  scaled.p = {.scale_factor = 3.0};
  auto model = tmod::onnx::to_onnx(tmod::trace_module(scaled, input), {.opset = 13});
  auto* node = model.mutable_graph()->mutable_node(0);
  REQUIRE(node->op_type() == "Resize");
  const std::string x = node->input(0), scales = node->input(2);
  node->set_op_type("Upsample");
  node->clear_input();
  node->add_input(x);
  node->add_input(scales);
  node->clear_attribute();
  set_string(*node, "mode", "nearest");
  model.mutable_opset_import(0)->set_version(9);
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  CHECK(same_bits(imported(input).tensor(), scaled.forward(input)));
}

}  // namespace tmod_test_onnx_interpolate
