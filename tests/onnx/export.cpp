// ONNX export: every op and builtin module has a rule, the exported model passes ONNX's checker
// and shape inference, names are kept, unmapped ops refuse the export without writing a file.
#include <tracemod/graph/wrap.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <models/resnet.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tmod_test_onnx_export {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "tracemod_onnx_test";
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::vector<std::string> op_types(const tmod::onnx::proto::ModelProto& m) {
  std::vector<std::string> v;
  for (const auto& n : m.graph().node()) v.push_back(n.op_type());
  return v;
}

}  // namespace

/// Ops registered without an ONNX rule, each with why: every other op of the registry has one.
const std::map<std::string, std::string> without_onnx{
    {"onnx_test.twice", "a C++ function made an op with tmod::wrap (below) has no ONNX rule"},
    {"nn.quantize", "an int8 graph is not exported (QuantizeLinear / DequantizeLinear export is not written)"},
    {"nn.dequantize", "an int8 graph is not exported (QuantizeLinear / DequantizeLinear export is not written)"},
    {"nn.quantized_conv2d", "an int8 graph is not exported (QLinearConv / QDQ export is not written)"},
    {"nn.quantized_linear", "an int8 graph is not exported (QLinearMatMul / QDQ export is not written)"},
    {"nn.quantized_add", "an int8 graph is not exported (QDQ export is not written)"}};

TEST_CASE("onnx export: every op of the op registry and every builtin module has a rule, or is listed without one") {
  for (const F::op_entry* e : F::op_registry::instance().entries())
    CHECK_MESSAGE(static_cast<bool>(e->onnx_export) == (without_onnx.count(e->target) == 0), e->target);
  for (const std::string& type : M::builtin_registry::instance().type_names())
    CHECK_MESSAGE(tmod::onnx::detail::module_rule(type) != nullptr, type);
}

TEST_CASE("onnx import: each ONNX op type is read by one rule, found through the op registry") {
  std::map<std::string, int> readers;
  for (const F::op_entry* e : F::op_registry::instance().entries())
    for (const F::onnx_import_rule& r : e->onnx_imports) ++readers[r.op_type];
  for (const auto& [type, n] : readers) CHECK_MESSAGE(n == 1, type);
  for (const char* type : {"Conv", "Gemm", "MatMul", "Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Add", "Sub", "Mul", "Div",
                           "Min", "Max", "Sum", "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization",
                           "Flatten", "Reshape", "Transpose", "Concat", "Softmax", "Clip", "Unsqueeze", "Squeeze",
                           "Identity", "Constant", "Dropout"})
    CHECK_MESSAGE(tmod::onnx::detail::find_rule(type) != nullptr, type);
  CHECK(tmod::onnx::detail::find_rule("Gelu") == nullptr);
}

TEST_CASE("onnx export: ResNet-18 passes the checker, keeps names and weights") {
  models::ResNet net(10, 8);
  net.eval();
  tmod::TracedModule traced = tmod::trace_module(net, tmod::randn({2, 3, 32, 32}));
  const auto model = tmod::onnx::to_onnx(traced, {.opset = 13, .dynamic_batch = true});
  const auto& g = model.graph();
  REQUIRE(g.input_size() == 1);
  CHECK(g.input(0).name() == traced.graph().inputs()[1]->name());
  CHECK(g.input(0).type().tensor_type().shape().dim(0).dim_param() == "batch");
  REQUIRE(g.output_size() == 1);
  CHECK(g.output(0).name() == traced.graph().outputs()[0]->name());
  const auto types = op_types(model);
  CHECK(std::count(types.begin(), types.end(), "Conv") == 20);
  CHECK(std::count(types.begin(), types.end(), "BatchNormalization") == 20);
  CHECK(std::count(types.begin(), types.end(), "Gemm") == 1);
  CHECK(std::count(types.begin(), types.end(), "GlobalAveragePool") == 1);
  CHECK(std::count(types.begin(), types.end(), "MaxPool") == 1);
  CHECK(std::count(types.begin(), types.end(), "Add") == 8);
  CHECK(std::count(types.begin(), types.end(), "Relu") == 17);
  CHECK(std::count(types.begin(), types.end(), "Flatten") == 1);
  // Every tensor of the state dict (but num_batches_tracked) is an initializer named by its path.
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) inits.insert(t.name());
  for (const auto& entry : net.state_dict()) {  // no structured binding: clang 14 cannot capture one
    const std::string& key = entry.first;
    if (key.find("num_batches_tracked") == std::string::npos) CHECK_MESSAGE(inits.count(key) == 1, key);
  }
  // Shape inference filled in every intermediate value.
  CHECK(g.value_info_size() > 40);
}

namespace {
struct Wrapped : tmod::Module {
  M::Linear fc{4, 4};
  TM_MODULE(Wrapped, fc)
  auto forward(const auto& x) const { return F::relu(fc(x)); }
};
const auto twice = tmod::wrap("onnx_test.twice", [](const tmod::Tensor& x) { return x + x; });
struct UsesWrapped : tmod::Module {
  TM_MODULE(UsesWrapped)
  auto forward(const auto& x) const { return F::relu(twice(x)); }
};
}  // namespace

TEST_CASE("onnx export: an op without a mapping refuses the export and writes nothing") {
  UsesWrapped user;
  tmod::TracedModule traced = tmod::trace_module(user, tmod::randn({2, 3}));
  const auto path = scratch("refused.onnx");
  std::filesystem::remove(path);
  try {
    tmod::onnx::export_model(traced, path);
    FAIL("export of an unmapped op succeeded");
  } catch (const tmod::value_error& e) {
    CHECK(std::string(e.what()).find("onnx_test.twice") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(path.string() + ".tmp"));
}

TEST_CASE("onnx export: batch norm in training mode is refused, opsets outside 13..17 too") {
  Wrapped w;
  tmod::TracedModule traced = tmod::trace_module(w, tmod::randn({2, 4}));
  CHECK_THROWS_AS((void)tmod::onnx::to_onnx(traced, {.opset = 9}), tmod::value_error);
  models::ResNet net(10, 8);
  net.train();
  tmod::TracedModule t2 = tmod::trace_module(net, tmod::randn({2, 3, 32, 32}));
  CHECK_THROWS_WITH_AS((void)tmod::onnx::to_onnx(t2), doctest::Contains("training mode"), tmod::value_error);
}

}  // namespace tmod_test_onnx_export
