// ONNX export -> import of pow (Pow), square (Mul), rsqrt (Sqrt + Reciprocal), astype (Cast) and
// getitem (Slice, with a Reshape dropping indexed axes): the exported model passes ONNX's checker,
// and the imported module computes what eager mode does.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

namespace tmod_test_onnx_power_indexing {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Tensor;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const void* pa = a.dtype() == tmod::DType::int32 ? static_cast<const void*>(a.data<std::int32_t>()) : a.data<float>();
  const void* pb = b.dtype() == tmod::DType::int32 ? static_cast<const void*>(b.data<std::int32_t>()) : b.data<float>();
  return std::memcmp(pa, pb, a.nbytes()) == 0;
}

struct Net : tmod::Module {
  TM_MODULE(Net)
  auto forward(const auto& x) const {
    const auto p = F::rsqrt(F::square(F::pow(x, 3) + 2.f)) * F::method_pow(x, 0.5f);
    const auto a = F::getitem(p, tmod::slice(tmod::none, tmod::none, -1), tmod::ellipsis, tmod::slice(1, -1));
    const auto b = F::getitem(p, tmod::all, 1, tmod::slice(-5, tmod::none, 2));
    return std::make_tuple(a, F::astype(b * 100.f, tmod::int32));
  }
};

std::map<std::string, int> op_counts(const tmod::onnx::proto::ModelProto& m) {
  std::map<std::string, int> c;
  for (const auto& n : m.graph().node()) ++c[n.op_type()];
  return c;
}

}  // namespace

TEST_CASE("onnx: pow, square, rsqrt, astype and getitem export to their ONNX ops and import with the same results") {
  Net net;
  const Tensor x = tmod::uniform({3, 2, 37}, 0.f, 3.f, 31);
  const tmod::TracedModule traced = tmod::trace_module(net, x);
  const auto model = tmod::onnx::to_onnx(traced, {.opset = 13});
  CHECK_NOTHROW(tmod::onnx::proto::checker::check_model(model));
  const std::map<std::string, int> ops = op_counts(model);
  CHECK(ops.at("Pow") == 2);
  CHECK(ops.at("Sqrt") == 1);
  CHECK(ops.at("Reciprocal") == 1);
  CHECK(ops.at("Cast") == 1);
  CHECK(ops.at("Slice") == 2);
  CHECK(ops.at("Reshape") == 1);  // b drops axis 1
  CHECK(ops.at("Mul") == 3);      // square, the product, * 100

  const auto path = std::filesystem::temp_directory_path() / "tracemod_onnx_test";
  std::filesystem::create_directories(path);
  tmod::onnx::export_model(traced, path / "power_indexing.onnx", {.opset = 13});  // a dynamic batch
  const tmod::TracedModule imported = tmod::onnx::import_model(path / "power_indexing.onnx", {.dims = {{"batch", 3}}});
  const auto [a, b] = net.forward(x);
  const tmod::Value got = imported(x);
  REQUIRE(got.size() == 2);
  CHECK(same_bits(got[0].tensor(), a));  // Mul(x, x) and div(1, sqrt) have square's and rsqrt's bits
  CHECK(same_bits(got[1].tensor(), b));
  REQUIRE(b.shape() == tmod::Shape{3, 3});
  // b[2, 1] is x[2, 1, 34] (-5 is 32, step 2) through the formula, times 100, truncated
  const float v = x.at({2, 1, 34}), t = std::pow(v, 3.f) + 2.f;
  const float p = 1.f / std::sqrt(t * t) * std::pow(v, 0.5f);
  CHECK(b.at<std::int32_t>({2, 1}) == static_cast<std::int32_t>(p * 100.f));

  // The exported bounds are Python's, which ONNX clamps as Python does: another batch size runs too.
  const tmod::TracedModule five = tmod::onnx::import_model(path / "power_indexing.onnx", {.dims = {{"batch", 5}}});
  const Tensor x5 = tmod::uniform({5, 2, 37}, 0.f, 3.f, 32);
  const auto [a5, b5] = net.forward(x5);
  const tmod::Value got5 = five(x5);
  CHECK(same_bits(got5[0].tensor(), a5));
  CHECK(same_bits(got5[1].tensor(), b5));
}

TEST_CASE("onnx import: a Cast to a type tracemod does not hold is unsupported, naming it") {
  Net net;
  const Tensor x = tmod::uniform({3, 2, 37}, 0.f, 3.f, 31);
  auto model = tmod::onnx::to_onnx(tmod::trace_module(net, x), {.opset = 13});
  for (auto& n : *model.mutable_graph()->mutable_node())
    if (n.op_type() == "Cast") n.mutable_attribute(0)->set_i(11);  // DOUBLE
  try {
    (void)tmod::onnx::import_model(model, {.dims = {{"batch", 3}}});
    FAIL("no error");
  } catch (const tmod::error& e) {
    CAPTURE(e.what());
    CHECK(std::string(e.what()).find("Cast to element type 11") != std::string::npos);
  }
}

}  // namespace tmod_test_onnx_power_indexing
