// ONNX and dynamic dims: a module traced with dynamic N, H, W exports its symbolic axes as
// dim_params, and import with dynamic_dims keeps them, so the imported ResNet-18 runs at other
// batch and image sizes, equal to the eager module.
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <model_goldens.hpp>
#include <models/mobilenet_v2.hpp>
#include <models/resnet.hpp>
#include <shape_value_models.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

namespace tmod_test_onnx_dynamic_shapes {

namespace {

namespace tmod = tracemod;
namespace proto = tracemod::onnx::proto;

/// "N, 3, H, W": each dim's param or value.
std::string dims_text(const proto::ValueInfoProto& v) {
  std::string s;
  for (const auto& d : v.type().tensor_type().shape().dim())
    s += (s.empty() ? "" : ", ") + (d.has_dim_value() ? std::to_string(d.dim_value()) : d.dim_param());
  return s;
}

}  // namespace

TEST_CASE("ONNX: dynamic dims export as dim_param; import with dynamic_dims runs ResNet-18 at other shapes") {
  models::ResNet net(10, 8);
  net.eval();
  const tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 32, 32}),
                                                  tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}});
  const auto dir = std::filesystem::temp_directory_path() / "tracemod_onnx_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / "dynamic_resnet.onnx";
  tmod::onnx::export_model(t, path);
  proto::ModelProto model;
  std::ifstream in(path, std::ios::binary);
  REQUIRE(model.ParseFromIstream(&in));
  CHECK(dims_text(model.graph().input(0)) == "N, 3, H, W");
  CHECK(dims_text(model.graph().output(0)) == "N, 10");

  const tmod::TracedModule back =
      tmod::onnx::import_model(path, {.dims = {{"N", 1}, {"H", 32}, {"W", 32}}, .dynamic_dims = true});
  CHECK(static_cast<const tmod::graph::TensorNode*>(back.graph().outputs()[0])->shape_text() == "(N, 10)");
  for (const tmod::Shape& s : {tmod::Shape{3, 3, 32, 32}, tmod::Shape{2, 3, 48, 40}}) {
    const tmod::Tensor x = tmod::randn(s);
    CHECK(golden::max_rel_err(back(x).tensor(), net(x)) <= 1e-4);
  }
  // Without dynamic_dims the import is static, at the given extents.
  const tmod::TracedModule fixed = tmod::onnx::import_model(path, {.dims = {{"N", 2}, {"H", 32}, {"W", 32}}});
  CHECK_THROWS_AS(fixed(tmod::randn({3, 3, 32, 32})), tmod::shape_error);
  std::filesystem::remove(path);
}

TEST_CASE("ONNX: a static trace's batch is dim_param 'batch' by default, its traced extent with dynamic_batch off") {
  models::ResNet net(10, 8);
  net.eval();
  const tmod::TracedModule t = tmod::trace_module(net, tmod::randn({2, 3, 32, 32}));
  const proto::ModelProto by_default = tmod::onnx::to_onnx(t);
  CHECK(dims_text(by_default.graph().input(0)) == "batch, 3, 32, 32");
  CHECK(dims_text(by_default.graph().output(0)) == "batch, 10");
  const proto::ModelProto fixed = tmod::onnx::to_onnx(t, {.dynamic_batch = false});
  CHECK(dims_text(fixed.graph().input(0)) == "2, 3, 32, 32");
  CHECK(dims_text(fixed.graph().output(0)) == "2, 10");
  // A trace with dynamic dims writes its own dims either way.
  const tmod::TracedModule d =
      tmod::trace_module(net, tmod::randn({2, 3, 32, 32}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  CHECK(dims_text(tmod::onnx::to_onnx(d, {.dynamic_batch = false}).graph().input(0)) == "N, 3, 32, 32");
  // The fixed model imports at its batch only.
  const auto path = std::filesystem::temp_directory_path() / "tracemod_onnx_fixed_batch.onnx";
  tmod::onnx::export_model(t, path, {.dynamic_batch = false});
  const tmod::TracedModule back = tmod::onnx::import_model(path);
  std::filesystem::remove(path);
  const tmod::Tensor x = tmod::randn({2, 3, 32, 32});
  CHECK(golden::max_rel_err(back(x).tensor(), net(x)) <= 1e-4);
  CHECK_THROWS_AS(back(tmod::randn({3, 3, 32, 32})), tmod::shape_error);
}

/// Traced once with dynamic N, H, W, exported and imported with dynamic_dims: PyTorch's outputs at
/// batch 1, 3 and 8 and at 224 and 160 pixels (tests/data/dynamic_shapes).
template <class Net>
void check_round_trip_against_pytorch(const Net& net, const std::string& model) {
  const tmod::TracedModule t = tmod::trace_module(net, golden::sine_input(1, 32),
                                                  tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}});
  const auto path = std::filesystem::temp_directory_path() / ("tracemod_onnx_dynamic_" + model + ".onnx");
  tmod::onnx::export_model(t, path);
  const tmod::TracedModule back =
      tmod::onnx::import_model(path, {.dims = {{"N", 1}, {"H", 32}, {"W", 32}}, .dynamic_dims = true});
  std::filesystem::remove(path);
  for (const golden::dynamic_case& c : golden::dynamic_cases) {
    const tmod::Tensor expected = golden::dynamic_output(model, c);
    golden::check_close(back(golden::sine_input(c.batch, c.size)).tensor(), expected, 1e-4,
                        1e-4 * golden::max_abs(expected), golden::dynamic_case_name(model, c) + " after ONNX");
  }
}

TEST_CASE("ONNX: ResNet-18 and MobileNetV2 exported with dynamic N, H, W equal PyTorch at three batch and image sizes") {
  models::ResNet resnet(10, 8);
  REQUIRE(resnet.load_state_dict(golden::model_state_dict("resnet18")).empty());
  resnet.eval();
  check_round_trip_against_pytorch(resnet, "resnet18");
  models::MobileNetV2 mobilenet = models::mobilenet_v2(10, 0.25, 4);
  REQUIRE(mobilenet.load_state_dict(golden::model_state_dict("mobilenet_v2")).empty());
  mobilenet.eval();
  check_round_trip_against_pytorch(mobilenet, "mobilenet_v2");
}

/// The same two nets exported by torch.onnx with dynamic_axes {input: {0: batch, 2: height,
/// 3: width}} (gen_dynamic_shapes.py), imported once with dynamic_dims: PyTorch's outputs at every
/// batch and image size.
TEST_CASE("ONNX: torch.onnx exports with dynamic_axes import with dynamic dims and equal PyTorch at three shapes") {
  for (const std::string model : {"resnet18", "mobilenet_v2"}) {
    const tmod::TracedModule t = tmod::onnx::import_model(
        golden::data_dir() / "dynamic_shapes" / (model + "_torch_dynamic.onnx"),
        {.dims = {{"batch", 1}, {"height", 32}, {"width", 32}}, .dynamic_dims = true});
    CHECK(static_cast<const tmod::graph::TensorNode*>(t.graph().outputs()[0])->shape_text() == "(batch, 10)");
    for (const golden::dynamic_case& c : golden::dynamic_cases) {
      const tmod::Tensor expected = golden::dynamic_output(model, c);
      golden::check_close(t(golden::sine_input(c.batch, c.size)).tensor(), expected, 1e-4,
                          1e-4 * golden::max_abs(expected), golden::dynamic_case_name(model, c) + " from torch.onnx");
    }
  }
}

namespace {

/// torch's `fc(x.view(x.size(0), -1))`: shapes read as values (GetVarShape).
struct ViewNet : tmod::Module {
  tmod::nn::Linear fc{24, 5};
  TM_MODULE(ViewNet, fc)
  auto forward(const auto& x) const {
    namespace F = tracemod::functional;
    return fc(F::reshape_to(x, F::tensor_from_list(F::size(x, 0), -1)));
  }
};

using shape_value_models::DoubledRows;

/// x.view(x.size(0) * 2, -1).
struct TwiceRows : tmod::Module {
  TM_MODULE(TwiceRows)
  auto forward(const auto& x) const {
    namespace F = tracemod::functional;
    return F::reshape_to(x, F::tensor_from_list(F::size(x, 0) * 2, -1));
  }
};

/// `net` traced at `shape` with a dynamic batch N and exported to a temporary file.
template <class Net>
std::filesystem::path export_dynamic(const Net& net, const tmod::Shape& shape, const std::string& name) {
  const tmod::TracedModule t = tmod::trace_module(net, tmod::randn(shape), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  const auto path = std::filesystem::temp_directory_path() / ("tracemod_onnx_" + name + ".onnx");
  tmod::onnx::export_model(t, path);
  return path;
}

/// The node types of an exported model, in order.
std::vector<std::string> node_types(const std::filesystem::path& path) {
  proto::ModelProto model;
  std::ifstream in(path, std::ios::binary);
  REQUIRE(model.ParseFromIstream(&in));
  std::vector<std::string> types;
  for (const auto& n : model.graph().node()) types.push_back(n.op_type());
  return types;
}

/// torch's `token.expand(x.size(0), -1, -1)` of a (1, 1, 4) parameter, concatenated before x.
struct TokenNet : tmod::Module {
  tmod::Parameter token{tmod::randn({1, 1, 4}, 3)};
  TM_MODULE(TokenNet, token)
  auto forward(const auto& x) const {
    namespace F = tracemod::functional;
    return F::concat(std::tuple{F::expand_to(token, F::tensor_from_list(F::size(x, 0), -1, -1)), x}, 1);
  }
};

}  // namespace

TEST_CASE("ONNX: int32 arithmetic on extents exports with int32 constants and exact floor division") {
  DoubledRows net;
  const auto path = export_dynamic(net, {2, 4, 6}, "shape_arith");
  const std::vector<std::string> types = node_types(path);
  for (const char* type : {"Shape", "Mul", "Mod", "Sub", "Div", "Reshape"})
    CHECK_MESSAGE(std::find(types.begin(), types.end(), type) != types.end(), type);
  for (const std::int64_t n : {1, 3}) {
    const tmod::TracedModule fixed = tmod::onnx::import_model(path, {.dims = {{"N", n}}});
    const tmod::Tensor x = tmod::randn({n, 4, 6});
    CHECK(fixed(x).tensor().shape() == tmod::Shape{2 * n, 2, 6});
    CHECK(golden::max_rel_err(fixed(x).tensor(), net(x)) == 0);
  }
  // with dynamic dims, the exported Mod and integer Div import as int32 arithmetic on the batch
  const tmod::TracedModule dynamic = tmod::onnx::import_model(path, {.dims = {{"N", 2}}, .dynamic_dims = true});
  for (const std::int64_t n : {1, 8}) {
    const tmod::Tensor x = tmod::randn({n, 4, 6});
    CHECK(dynamic(x).tensor().shape() == tmod::Shape{2 * n, 2, 6});
    CHECK(golden::max_rel_err(dynamic(x).tensor(), net(x)) == 0);
  }
  std::filesystem::remove(path);
}

TEST_CASE("ONNX: x.view(x.size(0) * 2, -1) exported with a dynamic batch imports with it and runs at any batch") {
  TwiceRows net;
  const auto path = export_dynamic(net, {2, 4, 6}, "shape_mul");
  const tmod::TracedModule back = tmod::onnx::import_model(path, {.dims = {{"N", 2}}, .dynamic_dims = true});
  std::filesystem::remove(path);
  CHECK(static_cast<const tmod::graph::TensorNode*>(back.graph().outputs()[0])->shape_text() == "(N*2, 12)");
  for (const std::int64_t n : {1, 4}) {
    const tmod::Tensor x = tmod::randn({n, 4, 6});
    CHECK(back(x).tensor().shape() == tmod::Shape{2 * n, 12});
    CHECK(golden::max_rel_err(back(x).tensor(), net(x)) == 0);
  }
}

TEST_CASE("ONNX: expand_to exports as Expand of the run-time shape, and re-imports at static dims") {
  TokenNet net;
  const tmod::TracedModule t = tmod::trace_module(net, tmod::randn({2, 5, 4}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  const auto path = std::filesystem::temp_directory_path() / "tracemod_onnx_expand_to.onnx";
  tmod::onnx::export_model(t, path);
  proto::ModelProto model;
  {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(model.ParseFromIstream(&in));
  }
  std::string expand_shape;
  for (const auto& n : model.graph().node())
    if (n.op_type() == "Expand") expand_shape = n.input(1);
  REQUIRE(!expand_shape.empty());
  bool initializer = false;
  for (const auto& i : model.graph().initializer()) initializer = initializer || i.name() == expand_shape;
  CHECK(!initializer);  // the shape is computed by the graph
  const tmod::TracedModule fixed = tmod::onnx::import_model(path, {.dims = {{"N", 3}}});
  const tmod::Tensor x = tmod::randn({3, 5, 4});
  CHECK(golden::max_rel_err(fixed(x).tensor(), net(x)) == 0);
  std::filesystem::remove(path);
}

TEST_CASE("ONNX: shapes read as values export as Shape, Cast and Reshape, and re-import at static dims") {
  ViewNet net;
  const tmod::TracedModule t =
      tmod::trace_module(net, tmod::randn({2, 2, 3, 4}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  const auto path = std::filesystem::temp_directory_path() / "tracemod_onnx_shape_values.onnx";
  tmod::onnx::export_model(t, path);
  proto::ModelProto model;
  {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(model.ParseFromIstream(&in));
  }
  std::vector<std::string> types;
  for (const auto& n : model.graph().node()) types.push_back(n.op_type());
  CHECK(std::find(types.begin(), types.end(), "Shape") != types.end());
  CHECK(std::find(types.begin(), types.end(), "Reshape") != types.end());
  const tmod::TracedModule fixed = tmod::onnx::import_model(path, {.dims = {{"N", 3}}});
  const tmod::Tensor x = tmod::randn({3, 2, 3, 4});
  CHECK(golden::max_rel_err(fixed(x).tensor(), net(x)) <= 1e-6);
  // with dynamic dims, Shape records GetVarShape and the reshape follows the batch
  const tmod::TracedModule dynamic = tmod::onnx::import_model(path, {.dims = {{"N", 3}}, .dynamic_dims = true});
  CHECK(static_cast<const tmod::graph::TensorNode*>(dynamic.graph().outputs()[0])->shape_text() == "(N, 5)");
  for (const std::int64_t n : {1, 8}) {
    const tmod::Tensor xn = tmod::randn({n, 2, 3, 4});
    CHECK(golden::max_rel_err(dynamic(xn).tensor(), net(xn)) <= 1e-6);
  }
  std::filesystem::remove(path);
}

}  // namespace tmod_test_onnx_dynamic_shapes
