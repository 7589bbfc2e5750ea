// An op defined outside the library, with its ONNX rule as members, registered at run time: it
// exports and imports with no edit of tracemod::onnx (softsign x / (1 + |x|), ONNX's Softsign).
#include <tracemod/functional/registry.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <string>
#include <string_view>
#include <tuple>

namespace tmod_test_onnx_extension {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

struct softsign_fn : F::op_base<softsign_fn> {
  static constexpr std::string_view name = "softsign";
  static constexpr std::string_view target = "onnx_test.softsign";
  static constexpr F::call_kind kind = F::call_kind::function;
  static constexpr bool elementwise = true;
  static constexpr std::array operands{F::operand{"inp", F::operand_kind::tensor}};
  using params = F::no_params;
  static constexpr std::tuple<> fields{};

  static tmod::Shape infer_shape(const params&, const tmod::Shape& x) { return x; }
  static tmod::Tensor eager(const params&, const tmod::Tensor& x) {
    tmod::Tensor y = tmod::Tensor::empty(x.shape(), tmod::DType::float32, target);
    for (std::int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = x.data<float>()[i] / (1 + std::abs(x.data<float>()[i]));
    return y;
  }

  static void onnx_export(F::onnx_export_context& cx, const params&) {
    cx.node("Softsign", {cx.input(0).name}, {cx.output()});
  }
  static constexpr std::array onnx_import_types{std::string_view("Softsign")};
  static void onnx_import(F::onnx_import_context& cx) { F::onnx_import_unary<softsign_fn>(cx); }
};
inline constexpr softsign_fn softsign{};

const F::op_entry& registered = F::op_registry::instance().add(F::detail::make_entry<softsign_fn>());

struct Small : tmod::Module {
  M::Linear fc{6, 5};
  TM_MODULE(Small, fc)
  auto forward(const auto& x) const { return F::relu(softsign(fc(x) * 3.0f)); }
};

}  // namespace

TEST_CASE("onnx: an op registered at run time with ONNX members exports and imports through its own rule") {
  CHECK(registered.onnx_export);
  REQUIRE(registered.onnx_imports.size() == 1);
  CHECK(registered.onnx_imports[0].op_type == "Softsign");

  Small net;
  const tmod::Tensor x = tmod::randn({4, 6});
  const tmod::Tensor eager = net(x);
  tmod::TracedModule traced = tmod::trace_module(net, x);

  const auto dir = std::filesystem::temp_directory_path() / "tracemod_onnx_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / "softsign.onnx";
  tmod::onnx::export_model(traced, path);
  tmod::onnx::proto::ModelProto model;
  tmod::onnx::read_proto(path, model);
  CHECK_NOTHROW(tmod::onnx::proto::checker::check_model(model));
  int softsigns = 0;
  for (const auto& n : model.graph().node()) softsigns += n.op_type() == "Softsign";
  CHECK(softsigns == 1);

  tmod::TracedModule imported = tmod::onnx::import_model(path, {.dims = {{"batch", 4}}});
  int calls = 0;
  for (const auto& up : imported.graph().expr_list_())
    calls += up->is_call() && !up->is_module_call() && up->target() == softsign_fn::target;
  CHECK(calls == 1);
  const tmod::Tensor back = imported(x);
  REQUIRE(back.shape() == eager.shape());
  // An independent reference: the scalar formula over the linear layer's output.
  const tmod::Tensor h = net.fc(x);
  for (std::int64_t i = 0; i < eager.numel(); ++i) {
    const float v = 3.0f * h.data<float>()[i];
    const float want = std::max(0.0f, v / (1 + std::abs(v)));
    CHECK(eager.data<float>()[i] == doctest::Approx(want).epsilon(1e-6));
    CHECK(back.data<float>()[i] == doctest::Approx(want).epsilon(1e-6));
  }
}

}  // namespace tmod_test_onnx_extension
