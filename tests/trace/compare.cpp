// Comparisons, logical ops, where and broadcast_to while tracing: the typed graph (static shapes,
// compile-time queries, evaluation against eager mode) and trace_module with a bool mask input (the
// printed graph with MegEngine's names and the dtypes of its nodes, the interpreter against eager
// mode).
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>
#include <same_bytes.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

namespace tmod_test_trace_compare {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

using tmod_test::same_bytes;

/// The larger of x and y through a comparison and where, and the mask of x > y.
const auto pick = [](const auto& x, const auto& y) {
  const auto gt = F::greater(x, y);
  return std::make_tuple(F::where(gt, x, y), gt);
};

/// Attention-mask style: a key padding mask (B, S) turned into an additive bias with where, added to
/// scores (B, H, S), and the keys kept where the mask is off and the score is positive.
struct Masked : tmod::Module {
  Tensor neg_inf = tmod::scalar_tensor(-std::numeric_limits<float>::infinity());
  Tensor zero = tmod::scalar_tensor(0.f);
  TM_MODULE(Masked)
  auto forward(const auto& scores, const auto& mask) const {
    const auto m = F::broadcast_to(F::reshape(mask, {2, 1, 5}), {2, 3, 5});
    const auto biased = scores + F::where(m, tmod::constant(neg_inf), tmod::constant(zero));
    const auto keep = F::logical_and(F::logical_not(m), F::greater_equal(scores, tmod::constant(zero)));
    return std::make_tuple(biased, F::astype(keep, tmod::float32), F::logical_xor(keep, F::equal(scores, scores)));
  }
};

const Tensor scores = tmod::uniform({2, 3, 5}, -1.f, 1.f, 41);
Tensor padding_mask() {
  const std::array<bool, 10> bits{false, false, false, true, true, false, false, false, false, true};
  return tmod::tensor(std::span<const bool>(bits), Shape{2, 5});
}

}  // namespace

TEST_CASE("typed graph: greater and where have static shapes, are found by type, and evaluate as eager mode") {
  const auto g = tmod::symbolic_trace(pick, tmod::spec<3, 1, 4>(), tmod::spec<5, 4>());
  static_assert(tmod::count_ops<F::greater_fn>(g) >= 1);  // the tuple holds the same node twice
  static_assert(tmod::count_ops<F::where_fn>(g) == 1);
  const Tensor x = tmod::uniform({3, 1, 4}, -1.f, 1.f, 42), y = tmod::uniform({5, 4}, -1.f, 1.f, 43);
  const auto [want, want_mask] = pick(x, y);
  const auto [got, got_mask] = g(x, y);
  CHECK(same_bytes(got, want));
  CHECK(same_bytes(got_mask, want_mask));
  CHECK(got_mask.dtype() == tmod::bool_);
  CHECK(same_bytes(want, F::maximum(x, y)));  // an independent reference: where(x > y, x, y) is max
}

TEST_CASE("trace_module: a bool mask input records where, the comparisons and the logical ops, prints and interprets as eager mode") {
  Masked net;
  const Tensor mask = padding_mask();
  const tmod::TracedModule traced = tmod::trace_module(net, scores, mask);
  std::ostringstream os;
  os << traced.graph();
  const std::string text = os.str();
  CAPTURE(text);
  CHECK(text.find("tensor.broadcast_to(reshape_out, (2, 3, 5), )") != std::string::npos);
  CHECK(text.find("where_out = tensor.where(broadcast_to_out, ") != std::string::npos);
  CHECK(text.find("logical_not_out = elemwise.logical_not(broadcast_to_out, )") != std::string::npos);
  CHECK(text.find("elemwise.greater_equal(x, const_tensor_1, )") != std::string::npos);
  CHECK(text.find("elemwise.logical_xor(logical_and_out, equal_out, )") != std::string::npos);
  CHECK(static_cast<const tmod::graph::TensorNode*>(traced.graph().inputs()[2])->dtype() == tmod::bool_);
  const auto* eq = traced.graph().get_function_by_type(F::equal).as_unique();
  CHECK(static_cast<const tmod::graph::TensorNode*>(eq->output())->dtype() == tmod::bool_);

  const auto [biased, keep, x] = net.forward(scores, mask);
  const tmod::Value got = traced(scores, mask);
  REQUIRE(got.size() == 3);
  CHECK(same_bytes(got[0].tensor(), biased));
  CHECK(same_bytes(got[1].tensor(), keep));
  CHECK(same_bytes(got[2].tensor(), x));
  // Scalar reference: masked keys are -inf, the others keep their score.
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 3; ++h)
      for (std::int64_t s = 0; s < 5; ++s) {
        const bool masked = mask.at<bool>({b, s});
        const float v = scores.at({b, h, s});
        CHECK(got[0].tensor().at({b, h, s}) == (masked ? -std::numeric_limits<float>::infinity() : v));
        CHECK(got[1].tensor().at({b, h, s}) == (!masked && v >= 0.f ? 1.f : 0.f));
      }
}

}  // namespace tmod_test_trace_compare
