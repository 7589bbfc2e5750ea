// scaled_dot_product_attention against float64 references written by tests/reference/gen_goldens.py
// (3-D and 4-D, L != S, Ev != E, masks broadcast over heads and batches, causal, an explicit scale,
// broadcast key/value batches, sequences of 200 and 300 crossing the kernel's blocks), its edge
// cases, the same bits at any thread count, and its errors.
#include "functional/golden_case.hpp"
#include "thread_counts.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/attention.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace tmod_test_functional_attention {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

// Sums of up to 300 float32 products and exponentials; outputs are O(1).
constexpr double rtol = 1e-5, atol = 1e-5;

TEST_CASE("functional: scaled_dot_product_attention matches the goldens") {
  const std::size_t count = golden_case::for_each_case("scaled_dot_product_attention", [](const std::string& name, auto& args) {
    const bool causal = args.flag("is_causal", false);
    const double s = args.real("scale", 0.0);
    const std::optional<double> scale = s == 0.0 ? std::nullopt : std::optional<double>(s);
    const auto in = golden_case::inputs(name, 3, 4);
    const Tensor y = in.size() == 4 ? F::scaled_dot_product_attention(in[0], in[1], in[2], in[3], causal, scale)
                                    : F::scaled_dot_product_attention(in[0], in[1], in[2], tmod::none, causal, scale);
    golden::check_close(y, golden::load(name, "out"), rtol, atol, name);
  });
  CHECK(count >= 10);
}

TEST_CASE("functional: scaled_dot_product_attention edge cases: hidden rows, no keys, one query") {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor q = tmod::uniform({1, 2, 3}, -1.f, 1.f, 1), k = tmod::uniform({1, 4, 3}, -1.f, 1.f, 2);
  const Tensor v = tmod::uniform({1, 4, 2}, -1.f, 1.f, 3);
  // row 0 sees every key through a 0 mask; row 1 sees none (softmax over all -inf: NaN, as PyTorch)
  Tensor mask = tmod::zeros({2, 4});
  for (int j = 0; j < 4; ++j) mask.data<float>()[4 + j] = -inf;
  const Tensor y = F::scaled_dot_product_attention(q, k, v, mask);
  const Tensor plain = F::scaled_dot_product_attention(q, k, v);
  CHECK(y.values<float>()[0] == plain.values<float>()[0]);
  CHECK(y.values<float>()[1] == plain.values<float>()[1]);
  CHECK(std::isnan(y.values<float>()[2]));
  CHECK(std::isnan(y.values<float>()[3]));
  // with one key every query returns that key's value
  const Tensor one = F::scaled_dot_product_attention(q, tmod::uniform({1, 1, 3}, -1.f, 1.f, 4), tmod::full({1, 1, 2}, 0.75f));
  for (float x : one.values<float>()) CHECK(x == doctest::Approx(0.75f));
  // no keys: the product with an empty value is zeros
  const Tensor none_seen = F::scaled_dot_product_attention(q, tmod::zeros({1, 0, 3}), tmod::zeros({1, 0, 2}));
  CHECK(none_seen.shape() == Shape{1, 2, 2});
  for (float x : none_seen.values<float>()) CHECK(x == 0.f);
  CHECK(F::scaled_dot_product_attention(tmod::zeros({1, 0, 3}), k, v).shape() == Shape{1, 0, 2});
}

TEST_CASE("functional: scaled_dot_product_attention gives the same bits at 1 to 4 threads") {
  const Tensor q = tmod::uniform({2, 2, 150, 16}, -1.f, 1.f, 31), k = tmod::uniform({2, 2, 170, 16}, -1.f, 1.f, 32);
  const Tensor v = tmod::uniform({2, 2, 170, 8}, -1.f, 1.f, 33), m = tmod::uniform({2, 1, 150, 170}, -2.f, 2.f, 34);
  const auto values = [](const Tensor& t) { return std::vector<float>(t.values<float>().begin(), t.values<float>().end()); };
  thread_counts::check_bit_identical("sdpa", [&] { return values(F::scaled_dot_product_attention(q, k, v, m)); });
  thread_counts::check_bit_identical("sdpa causal", [&] { return values(F::scaled_dot_product_attention(q, k, v, tmod::none, true)); });
  // one (batch, query block) item: the threads can only split its GEMMs
  const Tensor q1 = tmod::uniform({1, 200, 64}, -1.f, 1.f, 35), k1 = tmod::uniform({1, 300, 64}, -1.f, 1.f, 36);
  const Tensor v1 = tmod::uniform({1, 300, 64}, -1.f, 1.f, 37);
  thread_counts::check_bit_identical("sdpa one item", [&] { return values(F::scaled_dot_product_attention(q1, k1, v1)); });
}

TEST_CASE("functional: scaled_dot_product_attention refuses bad shapes, naming the op and the shapes") {
  const Tensor q = tmod::zeros({2, 5, 8}), k = tmod::zeros({2, 7, 8}), v = tmod::zeros({2, 7, 4});
  CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, tmod::zeros({2, 7, 6}), v),
                       "nn.scaled_dot_product_attention: query (2, 5, 8), key (2, 7, 6), value (2, 7, 4): the embedding "
                       "sizes E of query and key differ",
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, k, tmod::zeros({2, 6, 4})),
                       doctest::Contains("the sequence lengths S of key and value differ"), tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, tmod::zeros({3, 7, 8}), tmod::zeros({3, 7, 4})),
                       doctest::Contains("key (3, 7, 8), value (3, 7, 4): the batch dims do not broadcast"), tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, k, v, tmod::zeros({5, 6})),
                       doctest::Contains("attn_mask (5, 6) does not broadcast to the scores (2, 5, 7)"), tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, k, v, tmod::zeros({3, 2, 5, 7})),
                       doctest::Contains("attn_mask (3, 2, 5, 7) does not broadcast"), tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(tmod::zeros({8}), k, v), doctest::Contains("must have rank >= 2"),
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, k, v, tmod::zeros({5, 7}), true),
                       "nn.scaled_dot_product_attention: attn_mask (5, 7) and is_causal cannot be given together",
                       tmod::value_error);
  CHECK_THROWS_AS(F::scaled_dot_product_attention(q, k, tmod::zeros({2, 7, 4}, tmod::int32)), tmod::dtype_error);
}

}  // namespace

}  // namespace tmod_test_functional_attention
