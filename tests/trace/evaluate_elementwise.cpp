// Fused evaluation of elementwise graphs against eager mode (the same lambda called with tensors)
// and against plain scalar loops. Per evaluate.hpp, fused results equal eager ones bit for bit,
// except that a multiply followed by an add may become one FMA in the fused loop: chains where a
// product feeds an addition are compared within a few ulps when the target has FMA, exactly otherwise.
#include <golden.hpp>
#include <thread_counts.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/trace.hpp>

#include <doctest/doctest.h>

#include "trace/trace_test.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace tmod_test_trace_evaluate_elementwise {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;

using trace_test::check_matches;

std::string sized(const char* what, const tmod::Shape& s) { return std::string(what) + " " + s.to_string(); }

const std::vector<std::int64_t> odd_sizes{1, 15, 17, 1000, 4097};

}  // namespace

TEST_CASE("evaluate: unary chains equal eager mode exactly") {
  const auto f = [](const auto& x) {
    return F::tanh(F::sigmoid(F::exp(F::neg(F::relu6(F::relu(-x) + x)))));
  };
  for (const std::int64_t n : odd_sizes) {
    const auto g = tmod::symbolic_trace(f, tmod::spec({n}));
    const tmod::Tensor x = tmod::uniform({n}, -8.f, 8.f, static_cast<std::uint64_t>(n));
    check_matches(g(x), f(x), false, sized("unary chain", x.shape()));
  }
}

TEST_CASE("evaluate: every binary op with tensors on both sides") {
  const auto f = [](const auto& x, const auto& y) {
    const auto a = F::maximum(F::minimum(x, y), F::sub(y, x));
    const auto b = F::div(F::add(x, y), y - x + 7.f);
    return (a + b) - F::mul(a, x) * y / (x * x + 1.f);
  };
  for (const std::int64_t n : odd_sizes) {
    const auto g = tmod::symbolic_trace(f, tmod::spec({n}), tmod::spec({n}));
    const tmod::Tensor x = tmod::uniform({n}, -2.f, 2.f, 1), y = tmod::uniform({n}, -2.f, 2.f, 2);
    check_matches(g(x, y), f(x, y), true, sized("binary ops", x.shape()));
  }
}

TEST_CASE("evaluate: scalars on either side of every binary op") {
  const auto f = [](const auto& x) {
    const auto left = F::sub(2.f, F::maximum(-0.5f, F::minimum(1.5, x)));        // scalar first, double scalar
    const auto right = F::div(F::add(x, 3), 4.f) - F::sub(x, tmod::c<1, 4>);     // int scalar, constant scalar
    const auto ops = (1.f - left) / 2.f + 3.f / (right * right + 1.f) - 2 * x;
    return F::maximum(ops, 0.125f) + F::minimum(ops, -0.125f) + F::mul(0.5f, x);
  };
  for (const std::int64_t n : odd_sizes) {
    const auto g = tmod::symbolic_trace(f, tmod::spec({n}));
    const tmod::Tensor x = tmod::uniform({n}, -3.f, 3.f, 3);
    check_matches(g(x), f(x), true, sized("scalar operands", x.shape()));
  }
}

TEST_CASE("evaluate: relu(x * a + b) against a scalar loop") {
  const float a = 1.7f, b = -0.3f;
  const auto f = [a, b](const auto& x) { return F::relu(x * a + b); };
  for (const std::int64_t n : odd_sizes) {
    const auto g = tmod::symbolic_trace(f, tmod::spec({n}));
    const tmod::Tensor x = tmod::randn({n}, 7);
    tmod::Tensor expected = tmod::Tensor::empty({n});
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(x.data<float>()[i]) * a + b;
      expected.data<float>()[i] = static_cast<float>(std::max(v, 0.0));
    }
    // Double reference: within one float rounding of either evaluation order.
    golden::check_close(g(x), expected, 2e-7, 1e-7, sized("relu(x * a + b)", x.shape()));
    check_matches(g(x), f(x), true, sized("relu(x * a + b) vs eager", x.shape()));
  }
}

TEST_CASE("evaluate: min/max/relu chains against a scalar loop, exactly") {
  const auto f = [](const auto& x, const auto& y) { return F::maximum(F::relu(x - y), F::minimum(-x, y)); };
  const std::int64_t n = 4097;
  const auto g = tmod::symbolic_trace(f, tmod::spec({n}), tmod::spec({n}));
  const tmod::Tensor x = tmod::randn({n}, 8), y = tmod::randn({n}, 9);
  tmod::Tensor expected = tmod::Tensor::empty({n});
  for (std::int64_t i = 0; i < n; ++i) {
    const float xi = x.data<float>()[i], yi = y.data<float>()[i];
    expected.data<float>()[i] = std::max(std::max(xi - yi, 0.f), std::min(-xi, yi));
  }
  golden::check_close(g(x, y), expected, 0.0, 0.0, "maximum(relu(x - y), minimum(-x, y))");
}

TEST_CASE("evaluate: broadcasting leaves") {
  SUBCASE("(2, 3, 4) with (4)") {
    const auto f = [](const auto& x, const auto& b) { return F::relu(x * b - b) + 1.f; };
    const auto g = tmod::symbolic_trace(f, tmod::spec({2, 3, 4}), tmod::spec({4}));
    const tmod::Tensor x = tmod::randn({2, 3, 4}, 1), b = tmod::randn({4}, 2);
    check_matches(g(x, b), f(x, b), true, "(2,3,4) x (4)");
    CHECK(g(x, b).shape() == tmod::Shape{2, 3, 4});
  }
  SUBCASE("(N, C, H, W) with (C, 1, 1), odd extents") {
    const auto f = [](const auto& x, const auto& m, const auto& s) { return F::relu((x - m) / s); };
    const auto g = tmod::symbolic_trace(f, tmod::spec({2, 3, 5, 7}), tmod::spec({3, 1, 1}), tmod::spec({3, 1, 1}));
    const tmod::Tensor x = tmod::randn({2, 3, 5, 7}, 3), m = tmod::randn({3, 1, 1}, 4),
                       s = tmod::uniform({3, 1, 1}, 0.5f, 2.f, 5);
    check_matches(g(x, m, s), f(x, m, s), false, "(N,C,H,W) x (C,1,1)");
  }
  SUBCASE("a rank-0 tensor") {
    const auto f = [](const auto& x, const auto& s) { return F::maximum(x, s) - s / x; };
    const auto g = tmod::symbolic_trace(f, tmod::spec({17}), tmod::spec({}));
    const tmod::Tensor x = tmod::uniform({17}, 1.f, 2.f, 6), s = tmod::scalar_tensor(1.5f);
    check_matches(g(x, s), f(x, s), false, "rank-0 operand");
    const auto g0 = tmod::symbolic_trace([](const auto& a, const auto& b) { return a * b + 1.f; }, tmod::spec({}),
                                         tmod::spec({}));
    const tmod::Tensor r = g0(tmod::scalar_tensor(3.f), tmod::scalar_tensor(-2.f));
    CHECK(r.shape() == tmod::Shape{});
    CHECK(r.item() == -5.f);
  }
  SUBCASE("both operands broadcast: (5, 1, 17) with (3, 1)") {
    const auto f = [](const auto& x, const auto& y) { return F::exp(x - y) / (y + 4.f); };
    const auto g = tmod::symbolic_trace(f, tmod::spec({5, 1, 17}), tmod::spec({3, 1}));
    const tmod::Tensor x = tmod::randn({5, 1, 17}, 7), y = tmod::randn({3, 1}, 8);
    const tmod::Tensor r = g(x, y);
    CHECK(r.shape() == tmod::Shape{5, 3, 17});
    check_matches(r, f(x, y), false, "(5,1,17) x (3,1)");
  }
  SUBCASE("the smaller operand first, extent-1 axes inside") {
    const tmod::Tensor b = tmod::randn({4, 1, 1}, 9), x = tmod::randn({2, 4, 1, 9}, 10);
    const auto f = [](const auto& b, const auto& x) { return F::sub(b, x) * F::maximum(x, b); };
    const auto g = tmod::symbolic_trace(f, tmod::spec({4, 1, 1}), tmod::spec({2, 4, 1, 9}));
    check_matches(g(b, x), f(b, x), false, "(4,1,1) x (2,4,1,9)");
    // Only the first leaf repeats along the channel axis: no axes may merge across it.
    const auto f1 = [](const auto& b, const auto& x) { return F::sub(b, x) / 2.f; };
    const auto g1 = tmod::symbolic_trace(f1, tmod::spec({4, 1, 1}), tmod::spec({2, 4, 1, 9}));
    check_matches(g1(b, x), f1(b, x), false, "(4,1,1) - (2,4,1,9)");
  }
  SUBCASE("a captured constant tensor") {
    const tmod::Tensor bias = tmod::randn({1, 15}, 11);
    const auto f = [&bias](const auto& x) { return F::sigmoid(x + bias) - bias; };
    const auto g = tmod::symbolic_trace(f, tmod::spec({6, 15}));
    const tmod::Tensor x = tmod::randn({6, 15}, 12);
    check_matches(g(x), f(x), false, "constant leaf");
  }
  SUBCASE("every leaf has the output's extent-1 shape") {
    const auto f = [](const auto& x, const auto& y) { return x - y * 2.f; };
    const auto g = tmod::symbolic_trace(f, tmod::spec({1, 1}), tmod::spec({1}));
    const tmod::Tensor r = g(tmod::full({1, 1}, 5.0), tmod::full({1}, 1.5));
    CHECK(r.shape() == tmod::Shape{1, 1});
    CHECK(r.item() == 2.f);
  }
}

TEST_CASE("evaluate: empty tensors") {
  const auto f = [](const auto& x, const auto& y) { return F::relu(x + y) * 2.f; };
  const auto flat = tmod::symbolic_trace(f, tmod::spec({0, 3}), tmod::spec({0, 3}));
  CHECK(flat(tmod::zeros({0, 3}), tmod::zeros({0, 3})).shape() == tmod::Shape{0, 3});
  const auto bcast = tmod::symbolic_trace(f, tmod::spec({0, 3}), tmod::spec({3}));
  CHECK(bcast(tmod::zeros({0, 3}), tmod::ones({3})).shape() == tmod::Shape{0, 3});
}

TEST_CASE("evaluate: shared intermediates") {
  SUBCASE("r * r") {
    const auto f = [](const auto& x) {
      const auto r = F::relu(x);
      return r * r;
    };
    const auto g = tmod::symbolic_trace(f, tmod::spec({1000}));
    const tmod::Tensor x = tmod::randn({1000}, 13);
    tmod::Tensor expected = tmod::Tensor::empty({1000});
    for (std::int64_t i = 0; i < 1000; ++i) {
      const float r = std::max(x.data<float>()[i], 0.f);
      expected.data<float>()[i] = r * r;
    }
    golden::check_close(g(x), expected, 0.0, 0.0, "r * r against a loop");
    check_matches(g(x), f(x), false, "r * r");
  }
  SUBCASE("a value used by a fused chain and by a heavy op") {
    const auto f = [](const auto& x, const auto& w) {
      const auto e = F::exp(x * 0.5f);
      return F::matmul(e, w) - e;
    };
    const auto g = tmod::symbolic_trace(f, tmod::spec({5, 5}), tmod::spec({5, 5}));
    const tmod::Tensor x = tmod::randn({5, 5}, 17), w = tmod::randn({5, 5}, 18);
    check_matches(g(x, w), f(x, w), true, "shared by matmul and a fused chain");
  }
  SUBCASE("repeated squaring doubles the uses at every level") {
    const auto f = [](const auto& x) {
      const auto a = x * x - 0.5f;
      const auto b = a * a - 0.5f;
      const auto c = b * b - 0.5f;
      const auto d = c * c - 0.5f;
      return d * d;
    };
    const auto g = tmod::symbolic_trace(f, tmod::spec({17}));
    CHECK(g.call_count() == 9);
    const tmod::Tensor x = tmod::uniform({17}, -1.f, 1.f, 14);
    check_matches(g(x), f(x), true, "repeated squaring");
  }
}

TEST_CASE("evaluate: static specs") {
  const auto f = [](const auto& x, const auto& y) { return F::tanh(x * y) + F::relu6(y * 4.f); };
  const auto g = tmod::symbolic_trace(f, tmod::spec<3, 1, 5>(), tmod::spec<4, 1>());
  static_assert(tmod::static_output_shape(g) == tmod::Shape{3, 4, 5});
  const tmod::Tensor x = tmod::randn({3, 1, 5}, 15), y = tmod::randn({4, 1}, 16);
  check_matches(g(x, y), f(x, y), false, "static specs");
}

TEST_CASE("evaluate: a graph is reusable with new values of the same shape") {
  const auto f = [](const auto& x) { return F::sigmoid(x) * x; };
  const auto g = tmod::symbolic_trace(f, tmod::spec({15}));
  for (std::uint64_t seed = 0; seed < 3; ++seed) {
    const tmod::Tensor x = tmod::randn({15}, seed);
    check_matches(g(x), f(x), false, "reuse");
  }
}

TEST_CASE("evaluate: the fused loop is bit-identical at 1, 2, 3 and 4 threads") {
  const auto f = [](const auto& x, const auto& m, const auto& s) { return F::sigmoid((x - m) / s) * x + 1.f; };
  const auto flat = tmod::symbolic_trace(f, tmod::spec({3, 5, 7, 11}), tmod::spec({3, 5, 7, 11}),
                                         tmod::spec({3, 5, 7, 11}));
  const auto broadcast = tmod::symbolic_trace(f, tmod::spec({3, 5, 7, 11}), tmod::spec({5, 1, 1}), tmod::spec({1, 11}));
  const tmod::Tensor x = tmod::randn({3, 5, 7, 11}, 1), m = tmod::randn({3, 5, 7, 11}, 2),
                     s = tmod::uniform({3, 5, 7, 11}, 0.5f, 2.f, 3), mc = tmod::randn({5, 1, 1}, 4),
                     sc = tmod::uniform({1, 11}, 0.5f, 2.f, 5);
  const auto values = [](const tmod::Tensor& t) {
    const auto v = t.values<float>();
    return std::vector<float>(v.begin(), v.end());
  };
  thread_counts::check_bit_identical("fused, same shapes", [&] { return values(flat(x, m, s)); });
  thread_counts::check_bit_identical("fused, broadcasting", [&] { return values(broadcast(x, mc, sc)); });
}

}  // namespace tmod_test_trace_evaluate_elementwise
