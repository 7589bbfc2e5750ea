// Fused evaluation of graphs that mix heavy ops (conv2d, linear, matmul, pooling, softmax, concat,
// flatten, reshape, batch_norm) with elementwise chains, and of graphs with several outputs,
// against eager mode (the same lambda called with tensors). Heavy ops run the eager kernels, so
// only elementwise chains where a product feeds an addition may differ (FMA contraction, see
// evaluate.hpp); those are compared within a few ulps when the target has FMA.
#include <golden.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/trace.hpp>

#include <doctest/doctest.h>

#include "trace/trace_test.hpp"

#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tmod_test_trace_evaluate_mixed {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;

using trace_test::check_matches;

/// The operand list F::concat takes: a std::tuple while tracing, a std::vector of tensors eagerly.
template <class A, class B>
auto pair_of(const A& a, const B& b) {
  if constexpr (std::same_as<A, tmod::Tensor> && std::same_as<B, tmod::Tensor>)
    return std::vector<tmod::Tensor>{a, b};
  else
    return std::tuple{a, b};
}

}  // namespace

TEST_CASE("evaluate: conv2d, relu, max_pool2d, flatten, linear, softmax") {
  const auto f = [](const auto& x, const auto& w, const auto& b, const auto& fw) {
    const auto c = F::relu(F::conv2d(x, w, b, {.stride = 1, .padding = 1}) * 0.5f + 0.25f);
    const auto p = F::max_pool2d(c, 2, {.stride = 2});
    return F::softmax(F::linear(F::flatten(p, {.start_axis = 1}), fw) - 1.f, {.axis = 1});
  };
  const auto g = tmod::symbolic_trace(f, tmod::spec({2, 3, 9, 9}), tmod::spec({4, 3, 3, 3}), tmod::spec({4}),
                                      tmod::spec({10, 64}));
  const tmod::Tensor x = tmod::randn({2, 3, 9, 9}, 1), w = tmod::randn({4, 3, 3, 3}, 2), b = tmod::randn({4}, 3),
                     fw = tmod::randn({10, 64}, 4);
  const tmod::Tensor y = g(x, w, b, fw);
  CHECK(y.shape() == tmod::Shape{2, 10});
  CHECK(g.output().shape == tmod::Shape{2, 10});
  check_matches(y, f(x, w, b, fw), true, "conv net");
}

TEST_CASE("evaluate: matmul between elementwise chains, shared by both") {
  const auto f = [](const auto& a, const auto& b) {
    const auto s = F::sigmoid(a);
    return F::tanh(F::matmul(s, b, {.transpose_b = true}) + s);
  };
  const auto g = tmod::symbolic_trace(f, tmod::spec({7, 7}), tmod::spec({7, 7}));
  const tmod::Tensor a = tmod::randn({7, 7}, 5), b = tmod::randn({7, 7}, 6);
  check_matches(g(a, b), f(a, b), false, "matmul + shared sigmoid");
}

TEST_CASE("evaluate: concat of a tuple, reshape and a batched matmul") {
  const auto f = [](const auto& x, const auto& y) {
    const auto c = F::concat(pair_of(F::relu(x), y * 2.f), {.axis = 1});  // (2, 8)
    const auto r = F::reshape(c, {2, 2, 4});
    return F::matmul(r, F::reshape(c + 1.f, {2, 4, 2}));  // (2, 2, 2)
  };
  const auto g = tmod::symbolic_trace(f, tmod::spec({2, 3}), tmod::spec({2, 5}));
  const tmod::Tensor x = tmod::randn({2, 3}, 7), y = tmod::randn({2, 5}, 8);
  const tmod::Tensor r = g(x, y);
  CHECK(r.shape() == tmod::Shape{2, 2, 2});
  check_matches(r, f(x, y), false, "concat/reshape/matmul");
}

TEST_CASE("evaluate: pooling, batch_norm and transpose") {
  const auto f = [](const auto& x, const auto& mean, const auto& var) {
    const auto n = F::batch_norm(x, mean, var);  // inference: normalises with the running statistics
    const auto a = F::avg_pool2d(F::relu6(n * 3.f), 3, {.stride = 2, .padding = 1});
    return F::transpose(F::adaptive_avg_pool2d(a, 2) - 0.5f, {0, 2, 3, 1});
  };
  const auto g = tmod::symbolic_trace(f, tmod::spec({2, 3, 9, 9}), tmod::spec({3}), tmod::spec({3}));
  const tmod::Tensor x = tmod::randn({2, 3, 9, 9}, 18), mean = tmod::randn({3}, 19),
                     var = tmod::uniform({3}, 0.5f, 2.f, 20);
  const tmod::Tensor r = g(x, mean, var);
  CHECK(r.shape() == tmod::Shape{2, 2, 2, 3});
  check_matches(r, f(x, mean, var), false, "batch_norm/pooling/transpose");
}

TEST_CASE("evaluate: multiple outputs") {
  SUBCASE("std::tuple") {
    const auto f = [](const auto& x, const auto& w) {
      const auto h = F::linear(x, w);
      return std::tuple{F::relu(h), h * 2.f - x, F::softmax(h, {.axis = 0})};
    };
    const auto g = tmod::symbolic_trace(f, tmod::spec({3, 3}), tmod::spec({3, 3}));
    const tmod::Tensor x = tmod::randn({3, 3}, 9), w = tmod::randn({3, 3}, 10);
    const auto [relu, affine, soft] = g(x, w);
    const auto [e_relu, e_affine, e_soft] = f(x, w);
    check_matches(relu, e_relu, false, "output 0");
    check_matches(affine, e_affine, true, "output 1");
    check_matches(soft, e_soft, false, "output 2");
    static_assert(std::same_as<decltype(g(x, w)), std::tuple<tmod::Tensor, tmod::Tensor, tmod::Tensor>>);
  }
  SUBCASE("an output that is an input") {
    const auto f = [](const auto& x) { return std::tuple{x, F::relu(x)}; };
    const auto g = tmod::symbolic_trace(f, tmod::spec({5}));
    const tmod::Tensor x = tmod::randn({5}, 21);
    const auto [same, relu] = g(x);
    CHECK(same.shares_storage_with(x));
    check_matches(relu, F::relu(x), false, "relu output");
  }
  SUBCASE("std::pair of the same value twice") {
    const auto f = [](const auto& x) {
      const auto e = F::exp(x);
      return std::pair{e, e};
    };
    const auto g = tmod::symbolic_trace(f, tmod::spec({15}));
    const tmod::Tensor x = tmod::randn({15}, 11);
    const auto [a, b] = g(x);
    check_matches(a, F::exp(x), false, "pair.first");
    CHECK(a.shares_storage_with(b));  // one call, computed once
  }
  SUBCASE("run() flattens the outputs") {
    const auto f = [](const auto& x, const auto& y) { return std::tuple{x + y, x - y}; };
    const auto g = tmod::symbolic_trace(f, tmod::spec({4}), tmod::spec({4}));
    const std::vector<tmod::Tensor> in{tmod::randn({4}, 12), tmod::randn({4}, 13)};
    const std::vector<tmod::Tensor> out = g.run(in);
    REQUIRE(out.size() == 2);
    check_matches(out[0], in[0] + in[1], false, "run()[0]");
    check_matches(out[1], in[0] - in[1], false, "run()[1]");
  }
}

TEST_CASE("evaluate: static and dynamic specs give the same values") {
  const auto f = [](const auto& x, const auto& w, const auto& b) { return F::relu(F::linear(x, w, b)) / 3.f; };
  const auto dynamic = tmod::symbolic_trace(f, tmod::spec({5, 4}), tmod::spec({3, 4}), tmod::spec({3}));
  const auto fixed = tmod::symbolic_trace(f, tmod::spec<5, 4>(), tmod::spec<3, 4>(), tmod::spec<3>());
  static_assert(tmod::static_output_shape(fixed) == tmod::Shape{5, 3});
  static_assert(!tmod::has_static_output_shape(dynamic));
  const tmod::Tensor x = tmod::randn({5, 4}, 14), w = tmod::randn({3, 4}, 15), b = tmod::randn({3}, 16);
  check_matches(fixed(x, w, b), f(x, w, b), false, "static specs");
  check_matches(dynamic(x, w, b), fixed(x, w, b), false, "dynamic vs static");
}

}  // namespace tmod_test_trace_evaluate_mixed
