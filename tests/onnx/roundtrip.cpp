// ONNX import: ResNet-18 exported and re-imported computes the same outputs and has the flattened
// original's structure; PyTorch's own export of the same network imports and matches PyTorch's
// output; the imported module prints, saves and loads; unsupported features are listed at once.
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <model_goldens.hpp>
#include <models/resnet.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tmod_test_onnx_roundtrip {

namespace {

namespace tmod = tracemod;
namespace proto = tracemod::onnx::proto;

std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "tracemod_onnx_test";
  std::filesystem::create_directories(dir);
  return dir / name;
}

/// What a call computes, written independently of both the exporter and the importer: the builtin
/// module a call of the traced graph runs and the functional op an imported call runs, under one name.
std::string canonical(const tmod::graph::Expr& e) {
  static const std::map<std::string, std::string> names{
      {"Conv2d", "conv"},          {"nn.conv2d", "conv"},
      {"BatchNorm2d", "bn"},       {"nn.batch_norm", "bn"},
      {"ReLU", "relu"},            {"nn.relu", "relu"},
      {"MaxPool2d", "maxpool"},    {"nn.max_pool2d", "maxpool"},
      {"AdaptiveAvgPool2d", "gap"}, {"nn.adaptive_avg_pool2d", "gap"},
      {"Linear", "linear"},        {"nn.linear", "linear"},
      {"__add__", "add"},          {"elemwise.add", "add"},
      {"tensor.flatten", "flatten"}};
  const std::string key = e.is_module_call()
                              ? std::string(static_cast<const tmod::graph::ModuleNode*>(e.inputs()[0])->owner()->type_name())
                              : e.target();
  const auto it = names.find(key);
  return it == names.end() ? "?" + key : it->second;
}

/// Each call as (what it computes, which earlier calls or graph inputs feed it): weights, constants
/// and module nodes are not part of the structure.
std::vector<std::pair<std::string, std::vector<int>>> structure(const tmod::graph::Graph& g) {
  std::map<const tmod::graph::Node*, int> index;
  int input = 0;
  for (const tmod::graph::Node* n : g.inputs()) index[n] = -(++input);
  std::vector<std::pair<std::string, std::vector<int>>> out;
  for (const auto& up : g.expr_list_()) {
    const tmod::graph::Expr& e = *up;
    if (!e.is_call()) continue;
    std::vector<int> from;
    for (const tmod::graph::Node* in : e.inputs())
      if (const auto it = index.find(in); it != index.end() && in->is_tensor()) from.push_back(it->second);
    index[e.output()] = static_cast<int>(out.size());
    out.emplace_back(canonical(e), from);
  }
  return out;
}

double max_rel_diff(const tmod::Tensor& a, const tmod::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto va = a.values<float>(), vb = b.values<float>();
  double diff = 0;
  for (std::size_t i = 0; i < va.size(); ++i) diff = std::max(diff, std::abs(double(va[i]) - double(vb[i])));
  return diff / golden::max_abs(a);
}

}  // namespace

TEST_CASE("onnx round trip: ResNet-18 exported and imported computes the same and keeps its structure") {
  models::ResNet net(10, 8);
  net.load_state_dict(golden::model_state_dict("resnet18"));
  net.eval();
  const tmod::Tensor x = tmod::io::load_npy(golden::data_dir() / "resnet18" / "input.npy");
  tmod::TracedModule traced = tmod::trace_module(net, x);
  const auto path = scratch("resnet18.onnx");
  tmod::onnx::export_model(traced, path, {.opset = 13, .dynamic_batch = true});

  tmod::TracedModule imported = tmod::onnx::import_model(path, {.dims = {{"batch", 2}}});
  const tmod::Tensor expected = traced(x);
  const tmod::Tensor got = imported(x);
  CHECK(max_rel_diff(expected, got) <= 1e-5);

  const tmod::TracedModule flat = traced.flatten();
  const auto original = structure(flat.graph());
  const auto round_trip = structure(imported.graph());
  CHECK(original.size() == 20 + 20 + 17 + 8 + 4);  // conv, bn, relu, add; maxpool, gap, flatten, linear
  CHECK(original == round_trip);
  for (const auto& up : imported.graph().expr_list_())
    if (up->is_call()) CHECK(up->kind() == tmod::graph::ExprKind::call_function);
  // Weights are attributes, named after the initializers (the original's attribute paths).
  CHECK(imported.state_dict().size() == 20 + 20 * 4 + 2);  // conv weights, bn affine and statistics, fc
  CHECK(imported.getattr("layer1_0_conv1_weight").tensor().shape() == tmod::Shape{8, 8, 3, 3});
  std::ostringstream printed;
  printed << imported.graph();
  CAPTURE(printed.str());
  CHECK(printed.str().find("getattr(self, \"layer1_0_conv1_weight\")") != std::string::npos);
  CHECK(printed.str().find("= nn.conv2d(") != std::string::npos);

  SUBCASE("the imported module saves, loads and runs like any traced module") {
    std::ostringstream os;
    tmod::save(imported, os);
    const std::string bytes = os.str();
    tmod::TracedModule loaded = tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
    const tmod::Tensor again = loaded(x);
    CHECK(max_rel_diff(got, again) == 0);
  }
  SUBCASE("another batch size is a dims option away") {
    tmod::TracedModule four = tmod::onnx::import_model(path, {.dims = {{"batch", 4}}});
    CHECK(four.graph().inputs()[1]->name() == "x");
    CHECK(static_cast<const tmod::graph::TensorNode*>(four.graph().inputs()[1])->shape()[0] == 4);
  }
}

TEST_CASE("onnx import: torch.onnx.export's ResNet-18 matches PyTorch's output") {
  const std::filesystem::path path = TRACEMOD_TORCH_ONNX;
  if (!std::filesystem::exists(path)) {
    MESSAGE("skipped: " << path << " is missing (the build writes it with tests/reference/gen_onnx_resnet18.py "
                           "when python3-torch is installed)");
    return;
  }
  tmod::TracedModule net = tmod::onnx::import_model(path, {.dims = {{"batch", 2}}});
  const tmod::Tensor x = tmod::io::load_npy(golden::data_dir() / "resnet18" / "input.npy");
  const tmod::Tensor expected = tmod::io::load_npy(golden::data_dir() / "resnet18" / "output.npy");
  const tmod::Tensor got = net(x);
  const double scale = golden::max_abs(expected);
  golden::check_close(got, expected, 1e-4, 1e-4 * scale, "torch.onnx.export ResNet-18");
}

TEST_CASE("onnx import: every unsupported op, attribute and element type is listed in one error") {
  proto::ModelProto m;
  m.set_ir_version(proto::IR_VERSION);
  m.add_opset_import()->set_version(6);  // Add's attribute axis, which tracemod does not read, is opset 6's
  proto::GraphProto& g = *m.mutable_graph();
  g.set_name("bad");
  const auto value = [](proto::ValueInfoProto& v, const std::string& name, int type) {
    v.set_name(name);
    v.mutable_type()->mutable_tensor_type()->set_elem_type(type);
    v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
  };
  value(*g.add_input(), "x", proto::TensorProto::FLOAT);
  value(*g.add_input(), "d", proto::TensorProto::DOUBLE);
  const auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out) -> proto::NodeProto& {
    proto::NodeProto& n = *g.add_node();
    n.set_op_type(op);
    for (const auto& i : in) n.add_input(i);
    n.add_output(out);
    return n;
  };
  node("Relu", {"x"}, "a");
  node("GlobalMaxPool", {"a"}, "b");
  node("LpNormalization", {"b"}, "c");
  proto::NodeProto& add = node("Add", {"a", "a"}, "s");
  tmod::onnx::set_attr(add, "broadcast", std::int64_t{1});
  tmod::onnx::set_attr(add, "axis", std::int64_t{0});
  node("Neg", {"d"}, "e");
  value(*g.add_output(), "c", proto::TensorProto::FLOAT);
  try {
    (void)tmod::onnx::import_model(m);
    FAIL("import of unsupported ops succeeded");
  } catch (const tmod::value_error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find("4 unsupported features") != std::string::npos);
    CHECK(what.find("op GlobalMaxPool") != std::string::npos);
    CHECK(what.find("op LpNormalization") != std::string::npos);
    CHECK(what.find("attribute 'axis'") != std::string::npos);
    CHECK(what.find("element type DOUBLE") != std::string::npos);
  }
}

namespace {

/// The message of the E that `f` throws (a failed check if it throws none).
template <class E, class F>
std::string message_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("no exception was thrown");
  return "";
}

/// A one-input model of opset `opset`: x of `shape` (float32), the nodes `build` adds, output `out`.
template <class Build>
proto::ModelProto small_model(std::int64_t opset, const std::vector<std::int64_t>& shape, Build build) {
  proto::ModelProto m;
  m.set_ir_version(proto::IR_VERSION);
  m.add_opset_import()->set_version(opset);
  proto::GraphProto& g = *m.mutable_graph();
  g.set_name("small");
  proto::ValueInfoProto& v = *g.add_input();
  v.set_name("x");
  v.mutable_type()->mutable_tensor_type()->set_elem_type(proto::TensorProto::FLOAT);
  for (std::int64_t d : shape) v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  build(g);
  return m;
}

/// A float32 graph output of the given shape.
void add_output(proto::GraphProto& g, const std::string& name, const std::vector<std::int64_t>& shape) {
  proto::ValueInfoProto& v = *g.add_output();
  v.set_name(name);
  v.mutable_type()->mutable_tensor_type()->set_elem_type(proto::TensorProto::FLOAT);
  v.mutable_type()->mutable_tensor_type()->mutable_shape();
  for (std::int64_t d : shape) v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
}

proto::NodeProto& add_node(proto::GraphProto& g, const std::string& op, std::vector<std::string> in, const std::string& out) {
  proto::NodeProto& n = *g.add_node();
  n.set_op_type(op);
  n.set_name(out);
  for (const auto& i : in) n.add_input(i);
  n.add_output(out);
  return n;
}

void add_axes(proto::GraphProto& g, const std::string& name, const std::vector<std::int64_t>& axes) {
  proto::TensorProto& t = *g.add_initializer();
  t.set_name(name);
  t.set_data_type(proto::TensorProto::INT64);
  t.add_dims(static_cast<std::int64_t>(axes.size()));
  for (std::int64_t a : axes) t.add_int64_data(a);
}

}  // namespace

TEST_CASE("onnx import: Unsqueeze and Squeeze, axes as an input (opset 13) and as an attribute (opset 11)") {
  const tmod::Tensor x = tmod::randn({2, 3}, 5);
  // The shapes ONNX defines, derived by hand: unsqueeze (2, 3) at output axes {0, -1} gives
  // (1, 2, 3, 1); squeezing axis 0 gives (2, 3, 1); squeezing without axes drops every 1: (2, 3).
  const auto check = [&](const proto::ModelProto& m) {
    tmod::TracedModule tm = tmod::onnx::import_model(m);
    const std::vector<tmod::graph::NodeValue> in{tmod::Value(x)};
    const tmod::Value out = tm.run(in);
    REQUIRE(out.items().size() == 3);
    const std::vector<tmod::Shape> want{{1, 2, 3, 1}, {2, 3, 1}, {2, 3}};
    for (std::size_t i = 0; i < 3; ++i) {
      const tmod::Tensor y = out.items()[i].tensor();
      CHECK(y.shape() == want[i]);
      const auto vy = y.values<float>(), vx = x.values<float>();
      CHECK(std::equal(vy.begin(), vy.end(), vx.begin(), vx.end()));  // a reshape moves no element
    }
  };
  check(small_model(13, {2, 3}, [](proto::GraphProto& g) {
    add_axes(g, "ax_u", {0, -1});
    add_axes(g, "ax_s", {0});
    add_node(g, "Unsqueeze", {"x", "ax_u"}, "u");
    add_node(g, "Squeeze", {"u", "ax_s"}, "s");
    add_node(g, "Squeeze", {"s"}, "all");
    add_output(g, "u", {1, 2, 3, 1});
    add_output(g, "s", {2, 3, 1});
    add_output(g, "all", {2, 3});
  }));
  check(small_model(11, {2, 3}, [](proto::GraphProto& g) {
    tmod::onnx::set_attr(add_node(g, "Unsqueeze", {"x"}, "u"), "axes", std::vector<std::int64_t>{0, -1});
    tmod::onnx::set_attr(add_node(g, "Squeeze", {"u"}, "s"), "axes", std::vector<std::int64_t>{-4});
    add_node(g, "Squeeze", {"s"}, "all");
    add_output(g, "u", {1, 2, 3, 1});
    add_output(g, "s", {2, 3, 1});
    add_output(g, "all", {2, 3});
  }));

  // Squeezing an extent other than 1, naming an axis twice, and axes computed at run time are refused.
  const auto refused = [](const proto::ModelProto& m, const std::vector<std::string>& parts) {
    const std::string what = message_of<tmod::value_error>([&] { (void)tmod::onnx::import_model(m); });
    CAPTURE(what);
    for (const std::string& p : parts) CHECK(what.find(p) != std::string::npos);
  };
  refused(small_model(13, {2, 1}, [](proto::GraphProto& g) {
            add_axes(g, "ax", {0});
            add_node(g, "Squeeze", {"x", "ax"}, "s");
            add_output(g, "s", {1});
          }),
          {"node 's' (Squeeze)", "axis 0 of an input of shape (2, 1) has extent 2"});
  refused(small_model(13, {2, 3}, [](proto::GraphProto& g) {
            add_axes(g, "ax", {1, -3});  // -3 of the rank-4 output is 1
            add_node(g, "Unsqueeze", {"x", "ax"}, "u");
            add_output(g, "u", {2, 1, 3, 1});
          }),
          {"node 'u' (Unsqueeze)", "names axis 1 twice"});
  refused(small_model(13, {2, 3}, [](proto::GraphProto& g) {
            add_node(g, "Unsqueeze", {"x", "x"}, "u");
            add_output(g, "u", {1, 2, 3});
          }),
          {"node 'u' (Unsqueeze)", "axes 'x' is computed at run time"});
}

TEST_CASE("onnx import: a file over protobuf's 2 GiB limit is a format_error that says so") {
  const auto path = scratch("huge.onnx");
  std::ofstream(path, std::ios::binary).put('\0');
  std::filesystem::resize_file(path, std::uintmax_t{1} << 31);  // sparse: no disk space, never paged in
  const std::string what = message_of<tmod::format_error>([&] { (void)tmod::onnx::import_model(path); });
  CAPTURE(what);
  CHECK(what.find("2147483648 bytes; protobuf parses at most 2147483647") != std::string::npos);
  std::filesystem::remove(path);
  CHECK_THROWS_AS(tmod::onnx::import_model(scratch("missing.onnx")), tmod::format_error);
}

namespace {

/// The two fused ops of the conv epilogue and of elementwise fusion, which export unfused.
struct FusedOps : tmod::Module {
  tmod::Parameter weight{tmod::randn({4, 4, 3, 3}, 21)};
  tmod::Parameter bias{tmod::randn({4}, 22)};
  tmod::Parameter shift{tmod::randn({4, 1, 1}, 23)};
  TM_MODULE(FusedOps, weight, bias, shift)
  auto forward(const auto& x) const {
    namespace F = tracemod::functional;
    auto y = F::conv_bias_activation(x, weight, bias, x, 1, 1, 1, 1, "relu6");
    auto z = F::conv_bias_activation(y, weight, tmod::none, tmod::none, 1, 1, 1, 1, "relu");
    return F::fused_elementwise(std::make_tuple(z, shift, y), "maximum(relu6(x0 * 0.5 - x1), -x2) / 2 + tanh(x1)");
  }
};

}  // namespace

TEST_CASE("onnx round trip: conv_bias_activation and elemwise.fused export as the ops they fuse") {
  FusedOps m;
  const tmod::Tensor x = tmod::randn({2, 4, 6, 6}, 24);
  tmod::TracedModule traced = tmod::trace_module(m, x);
  const auto path = scratch("fused_ops.onnx");
  tmod::onnx::export_model(traced, path, {.opset = 13, .dynamic_batch = true});
  tmod::TracedModule imported = tmod::onnx::import_model(path, {.dims = {{"batch", 2}}});
  // An independent reference: the same computation with the unfused functional ops.
  namespace F = tracemod::functional;
  const tmod::Tensor y = F::relu6(F::conv2d(x, m.weight, m.bias, 1, 1) + x);
  const tmod::Tensor z = F::relu(F::conv2d(y, m.weight, tmod::none, 1, 1));
  const tmod::Tensor expected = F::maximum(F::relu6(z * 0.5f - m.shift), -y) / 2.f + F::tanh(m.shift);
  CHECK(max_rel_diff(expected, traced(x).tensor()) <= 1e-5);
  CHECK(max_rel_diff(expected, imported(x).tensor()) <= 1e-5);
}

namespace {

/// A list with a traced item scales the row, and F::stack joins it with the input on a new axis.
struct Stacked : tmod::Module {
  tracemod::nn::Linear fc{3, 1};
  TM_MODULE(Stacked, fc)
  auto forward(const auto& x) const {
    namespace F = tracemod::functional;
    auto s = F::reshape(fc(x), F::int_list{});
    auto row = x * F::tensor_from_list(1, s, 2);
    return F::stack(std::make_tuple(row, x), 1);
  }
};

/// A user module held in a container beside builtins.
struct Twice : tmod::Module {
  tracemod::nn::Linear fc{4, 4};
  TM_MODULE(Twice, fc)
  auto forward(const auto& x) const { return fc(x) * 2.f; }
};

/// A ModuleDict and a ModuleList, each of several classes.
struct Containers : tmod::Module {
  tracemod::nn::ModuleDict<tracemod::nn::Linear, Twice, tracemod::nn::ReLU> blocks{
      {"proj", tracemod::nn::Linear(3, 4)}, {"act", tracemod::nn::ReLU{}}, {"mix", Twice{}}};
  tracemod::nn::ModuleList<Twice, tracemod::nn::ReLU6, tracemod::nn::Linear> layers{Twice{}, tracemod::nn::ReLU6{},
                                                                                       tracemod::nn::Linear(4, 2)};
  TM_MODULE(Containers, blocks, layers)
  auto forward(const auto& x) const {
    auto y = blocks["mix"](blocks["act"](blocks["proj"](x)));  // by key
    for (const auto& layer : layers) y = layer(y);             // looped over
    return y;
  }
};

}  // namespace

TEST_CASE("onnx round trip: tensor.stack exports as Unsqueeze and Concat and imports back") {
  namespace F = tracemod::functional;
  tmod::manual_seed(31);
  Stacked m;
  const tmod::Tensor x = tmod::tensor({{0.5f, -1.f, 2.f}});
  // The reference, by hand: s = fc(x); the output is [[x0, x1 * s, x2 * 2], [x0, x1, x2]] on axis 1.
  float s = m.fc.bias.data<float>()[0];
  for (int i = 0; i < 3; ++i) s += m.fc.weight.data<float>()[i] * x.data<float>()[i];
  const std::vector<float> expected{0.5f, -1.f * s, 4.f, 0.5f, -1.f, 2.f};
  tmod::TracedModule traced = tmod::trace_module(m, x);
  const auto path = scratch("stacked.onnx");
  tmod::onnx::export_model(traced, path);
  tmod::TracedModule imported = tmod::onnx::import_model(path);
  const tmod::Tensor y = imported(x).tensor();
  REQUIRE(y.shape() == tmod::Shape{1, 2, 3});
  const auto v = y.values<float>();
  CHECK(std::vector<float>(v.begin(), v.end()) == expected);
  // Two stacks (the list, the pair), each one Concat of Unsqueezed inputs, read back as concats.
  CHECK(imported.graph().get_function_by_type(F::concat).as_count() == 2);
  CHECK(imported.graph().get_function_by_type(F::stack).as_count() == 0);
}

TEST_CASE("onnx round trip: a ModuleDict and a ModuleList of several classes export flat and import equal to eager") {
  tmod::manual_seed(32);
  Containers m;
  const tmod::Tensor x = tmod::randn({2, 3}, 33);
  tmod::TracedModule traced = tmod::trace_module(m, x);
  const auto path = scratch("containers.onnx");
  tmod::onnx::export_model(traced, path);
  tmod::TracedModule imported = tmod::onnx::import_model(path, {.dims = {{"batch", 5}}});
  std::filesystem::remove(path);
  const tmod::Tensor other = tmod::randn({5, 3}, 34);
  const tmod::Tensor got = imported(other).tensor(), want = m(other);
  REQUIRE(got.shape() == want.shape());
  for (std::int64_t i = 0; i < want.numel(); ++i)
    CHECK(got.data<float>()[i] == doctest::Approx(want.data<float>()[i]).epsilon(1e-5));
}

}  // namespace tmod_test_onnx_roundtrip
