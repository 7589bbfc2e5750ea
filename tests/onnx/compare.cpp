// ONNX export -> import of a module with a BOOL input (a key padding mask): broadcast_to (Expand),
// where (Where), the comparisons (Equal, Less, Greater, GreaterOrEqual, Not(Equal)), the logical ops
// (Not, And, Or, Xor) and astype to and from bool (Cast); the model passes ONNX's checker and the
// imported module computes what eager mode does. A Cast to BOOL of a value computed at run time.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>
#include <same_bytes.hpp>

#include <array>
#include <cstring>
#include <limits>
#include <map>
#include <string>

namespace tmod_test_onnx_compare {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

using tmod_test::same_bytes;

struct Masked : tmod::Module {
  Tensor neg_inf = tmod::scalar_tensor(-std::numeric_limits<float>::infinity());
  Tensor zero = tmod::scalar_tensor(0.f);
  TM_MODULE(Masked)
  auto forward(const auto& scores, const auto& mask) const {
    const auto m = F::broadcast_to(F::reshape(mask, {2, 1, 5}), {2, 3, 5});
    const auto biased = scores + F::where(m, tmod::constant(neg_inf), tmod::constant(zero));
    const auto z = tmod::constant(zero);
    const auto sign = F::logical_or(F::less(scores, z), F::greater(scores, z));
    const auto keep = F::logical_and(F::logical_not(m), F::greater_equal(scores, z));
    const auto odd = F::logical_xor(F::astype(F::astype(scores, tmod::bool_), tmod::bool_), F::not_equal(scores, z));
    return std::make_tuple(biased, F::astype(keep, tmod::float32), F::logical_xor(sign, F::equal(scores, scores)), odd);
  }
};

const Tensor scores = tmod::uniform({2, 3, 5}, -1.f, 1.f, 51);
Tensor padding_mask() {
  const std::array<bool, 10> bits{false, true, false, false, true, false, false, false, true, true};
  return tmod::tensor(std::span<const bool>(bits), Shape{2, 5});
}

/// x where a fixed bool mask (a constant of the graph) holds, -x elsewhere.
struct ConstGate : tmod::Module {
  Tensor fixed = tmod::tensor({true, false, true});
  TM_MODULE(ConstGate)
  auto forward(const auto& x) const { return F::where(tmod::constant(fixed), x, F::neg(x)); }
};

std::map<std::string, int> op_counts(const tmod::onnx::proto::ModelProto& m) {
  std::map<std::string, int> c;
  for (const auto& n : m.graph().node()) ++c[n.op_type()];
  return c;
}

}  // namespace

TEST_CASE("onnx: a BOOL input, where, the comparisons, the logical ops and Cast to/from BOOL round-trip") {
  Masked net;
  const Tensor mask = padding_mask();
  const tmod::TracedModule traced = tmod::trace_module(net, scores, mask);
  const auto model = tmod::onnx::to_onnx(traced, {.opset = 13});
  CHECK_NOTHROW(tmod::onnx::proto::checker::check_model(model));
  CHECK(model.graph().input(1).type().tensor_type().elem_type() == tmod::onnx::proto::TensorProto::BOOL);
  const std::map<std::string, int> ops = op_counts(model);
  CHECK(ops.at("Expand") == 1);
  CHECK(ops.at("Where") == 1);
  CHECK(ops.at("Less") == 1);
  CHECK(ops.at("Greater") == 1);
  CHECK(ops.at("GreaterOrEqual") == 1);
  CHECK(ops.at("Equal") == 2);  // equal, and not_equal's Not(Equal)
  CHECK(ops.at("Not") == 2);
  CHECK(ops.at("And") == 1);
  CHECK(ops.at("Or") == 1);
  CHECK(ops.at("Xor") == 2);
  CHECK(ops.at("Cast") == 3);

  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  const auto [biased, keep, x, odd] = net.forward(scores, mask);
  const tmod::Value got = imported(scores, mask);
  REQUIRE(got.size() == 4);
  CHECK(same_bytes(got[0].tensor(), biased));
  CHECK(same_bytes(got[1].tensor(), keep));
  CHECK(same_bytes(got[2].tensor(), x));
  CHECK(same_bytes(got[3].tensor(), odd));
  CHECK(got[3].tensor().dtype() == tmod::bool_);
  // Scalar reference for the mask: masked keys are -inf.
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t s = 0; s < 5; ++s)
      CHECK((got[0].tensor().at({b, 1, s}) == -std::numeric_limits<float>::infinity()) == mask.at<bool>({b, s}));
}

TEST_CASE("onnx: a bool constant of the module exports as a BOOL initializer and imports back") {
  ConstGate net;
  const Tensor x = tmod::uniform({2, 3}, -1.f, 1.f, 52);
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, x), {.opset = 13});
  CHECK_NOTHROW(tmod::onnx::proto::checker::check_model(model));
  int bool_initializers = 0;
  for (const auto& t : model.graph().initializer())
    bool_initializers += t.data_type() == tmod::onnx::proto::TensorProto::BOOL ? 1 : 0;
  CHECK(bool_initializers == 1);
  const Tensor got = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}})(x).tensor();
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) CHECK(got.at({i, j}) == (j != 1 ? x.at({i, j}) : -x.at({i, j})));
}

TEST_CASE("onnx import: a BOOL tensor into an op that computes in float32 is unsupported, naming it") {
  Masked net;
  auto model = tmod::onnx::to_onnx(tmod::trace_module(net, scores, padding_mask()), {.opset = 13});
  for (auto& n : *model.mutable_graph()->mutable_node())
    if (n.op_type() == "Where") n.set_op_type("Relu"), n.mutable_input()->DeleteSubrange(1, 2);
  try {
    (void)tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
    FAIL("no error");
  } catch (const tmod::error& e) {
    CAPTURE(e.what());
    CHECK(std::string(e.what()).find("element type BOOL into nn.relu") != std::string::npos);
  }
}

}  // namespace tmod_test_onnx_compare
