// Elementwise ops (F::relu ... F::maximum) against the PyTorch goldens and scalar loops: odd
// sizes, size-1 broadcasting, empty dims, rank 0, and scalars on either side.
#include "functional/golden_case.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/elementwise.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace tmod_test_functional_elementwise {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

// Selections and sign flips are exact; + - * / of two floats are correctly rounded, so they match
// the float64 golden rounded once to float32 up to this bound.
constexpr double exact = 0.0;
constexpr double arith_rtol = 1e-6, arith_atol = 1e-6;

// exp, sigmoid and tanh: at most this many float32 ulps from the correctly rounded value.
constexpr std::int64_t transcendental_ulps = 4;

std::int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : std::int64_t{1} << 40;
  const auto ordered = [](float f) {
    const auto i = std::bit_cast<std::int32_t>(f);
    return i < 0 ? std::int64_t{std::numeric_limits<std::int32_t>::min()} - i : std::int64_t{i};
  };
  return std::abs(ordered(a) - ordered(b));
}

// The largest ulp distance between two float tensors of the same shape.
std::int64_t max_ulps(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.shape() == expected.shape());
  std::int64_t worst = 0;
  for (std::int64_t i = 0; i < actual.numel(); ++i)
    worst = std::max(worst, ulp_distance(actual.data<float>()[i], expected.data<float>()[i]));
  return worst;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    if (std::bit_cast<std::uint32_t>(a.data<float>()[i]) != std::bit_cast<std::uint32_t>(b.data<float>()[i]))
      return false;
  return true;
}

Tensor seeded(const Shape& s, std::uint64_t seed, float scale = 3.f) { return F::mul(tmod::randn(s, seed), scale); }

// A tensor of `s` with |values| in [0.5, 2]: safe divisors.
Tensor away_from_zero(const Shape& s, std::uint64_t seed) {
  Tensor t = tmod::randn(s, seed);
  for (float& v : t.values<float>()) v = std::copysign(0.5f + std::fmod(std::abs(v), 1.5f), v);
  return t;
}

template <class Op>
std::size_t check_unary_goldens(std::string_view op, const Op& f, bool transcendental) {
  return golden_case::for_each_case(op, [&](const std::string& name, golden_case::Args&) {
    const auto in = golden_case::inputs(name, 1, 1);
    const Tensor expected = golden::load(name, "out");
    const Tensor y = f(in[0]);
    if (transcendental) {
      REQUIRE(y.shape() == expected.shape());
      CHECK_MESSAGE(max_ulps(y, expected) <= transcendental_ulps, name << ": " << max_ulps(y, expected) << " ulps");
    } else {
      golden::check_close(y, expected, exact, exact, name);
    }
  });
}

template <class Op>
std::size_t check_binary_goldens(std::string_view op, const Op& f, double rtol, double atol) {
  return golden_case::for_each_case(op, [&](const std::string& name, golden_case::Args&) {
    const auto in = golden_case::inputs(name, 2, 2);
    golden::check_close(f(in[0], in[1]), golden::load(name, "out"), rtol, atol, name);
  });
}

TEST_CASE("functional: unary ops match the goldens") {
  CHECK(check_unary_goldens("relu", F::relu, false) >= 6);
  CHECK(check_unary_goldens("relu6", F::relu6, false) >= 6);
  CHECK(check_unary_goldens("neg", F::neg, false) >= 6);
  CHECK(check_unary_goldens("exp", F::exp, true) >= 6);
  CHECK(check_unary_goldens("sigmoid", F::sigmoid, true) >= 6);
  CHECK(check_unary_goldens("tanh", F::tanh, true) >= 6);
}

TEST_CASE("functional: binary ops match the goldens (broadcasting, rank 0, empty)") {
  CHECK(check_binary_goldens("add", F::add, arith_rtol, arith_atol) >= 9);
  CHECK(check_binary_goldens("sub", F::sub, arith_rtol, arith_atol) >= 9);
  CHECK(check_binary_goldens("mul", F::mul, arith_rtol, arith_atol) >= 9);
  CHECK(check_binary_goldens("div", F::div, arith_rtol, arith_atol) >= 9);
  CHECK(check_binary_goldens("minimum", F::minimum, exact, exact) >= 9);
  CHECK(check_binary_goldens("maximum", F::maximum, exact, exact) >= 9);
}

// Scalar loops in float: the same correctly rounded operation per element as the kernels.
TEST_CASE("functional: unary and binary ops at sizes around the SIMD width") {
  for (std::int64_t n : {1, 3, 7, 15, 16, 17, 31, 32, 33, 63, 65, 100, 257}) {
    CAPTURE(n);
    const Tensor x = seeded({n}, 10 + static_cast<std::uint64_t>(n));
    const Tensor z = away_from_zero({n}, 20 + static_cast<std::uint64_t>(n));
    const Tensor relu = F::relu(x), relu6 = F::relu6(x), neg = F::neg(x), ex = F::exp(x), sig = F::sigmoid(x),
                 th = F::tanh(x);
    const Tensor add = F::add(x, z), sub = F::sub(x, z), mul = F::mul(x, z), div = F::div(x, z),
                 mn = F::minimum(x, z), mx = F::maximum(x, z);
    for (std::int64_t i = 0; i < n; ++i) {
      const float a = x.data<float>()[i], b = z.data<float>()[i];
      const double ad = a;
      CHECK(relu.data<float>()[i] == std::max(a, 0.f));
      CHECK(relu6.data<float>()[i] == std::min(std::max(a, 0.f), 6.f));
      CHECK(neg.data<float>()[i] == -a);
      CHECK(ulp_distance(ex.data<float>()[i], static_cast<float>(std::exp(ad))) <= transcendental_ulps);
      CHECK(ulp_distance(sig.data<float>()[i], static_cast<float>(1.0 / (1.0 + std::exp(-ad)))) <= transcendental_ulps);
      CHECK(ulp_distance(th.data<float>()[i], static_cast<float>(std::tanh(ad))) <= transcendental_ulps);
      CHECK(add.data<float>()[i] == a + b);
      CHECK(sub.data<float>()[i] == a - b);
      CHECK(mul.data<float>()[i] == a * b);
      CHECK(div.data<float>()[i] == a / b);
      CHECK(mn.data<float>()[i] == std::min(a, b));
      CHECK(mx.data<float>()[i] == std::max(a, b));
    }
  }
}

TEST_CASE("functional: size-1 broadcasting against a scalar loop") {
  // (r, 1) with (1, c), (1, c) with (r, 1), and (b, r, c) with (r, 1): odd extents throughout.
  for (std::int64_t r : {1, 5, 17}) {
    for (std::int64_t c : {1, 3, 19, 33}) {
      CAPTURE(r);
      CAPTURE(c);
      const Tensor col = seeded({r, 1}, 1), row = seeded({1, c}, 2), cube = seeded({2, r, c}, 3);
      const Tensor y = F::sub(col, row), y2 = F::mul(row, col), y3 = F::maximum(cube, col);
      REQUIRE(y.shape() == Shape{r, c});
      REQUIRE(y2.shape() == Shape{r, c});
      REQUIRE(y3.shape() == Shape{2, r, c});
      for (std::int64_t i = 0; i < r; ++i)
        for (std::int64_t j = 0; j < c; ++j) {
          CHECK(y.at({i, j}) == col.at({i, 0}) - row.at({0, j}));
          CHECK(y2.at({i, j}) == row.at({0, j}) * col.at({i, 0}));
          for (std::int64_t b = 0; b < 2; ++b) CHECK(y3.at({b, i, j}) == std::max(cube.at({b, i, j}), col.at({i, 0})));
        }
    }
  }
}

TEST_CASE("functional: scalars on either side of a binary op") {
  const Tensor x = away_from_zero({2, 19}, 7);
  const float s = 1.75f;
  const Tensor ops[] = {F::add(x, s),     F::add(s, x),     F::sub(x, s),     F::sub(s, x),
                        F::mul(x, s),     F::mul(s, x),     F::div(x, s),     F::div(s, x),
                        F::minimum(x, s), F::minimum(s, x), F::maximum(x, s), F::maximum(s, x)};
  for (const Tensor& y : ops) REQUIRE(y.shape() == x.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float a = x.data<float>()[i];
    const float expected[] = {a + s, s + a, a - s, s - a, a * s, s * a, a / s, s / a,
                              std::min(a, s), std::min(s, a), std::max(a, s), std::max(s, a)};
    for (std::size_t k = 0; k < std::size(ops); ++k) {
      CAPTURE(k);
      CHECK(ops[k].data<float>()[i] == expected[k]);
    }
  }
  // An int scalar, a double and a compile-time constant behave as the float of the same value.
  CHECK(same_bits(F::mul(x, 2), F::mul(x, 2.f)));
  CHECK(same_bits(F::sub(3.0, x), F::sub(3.f, x)));
  CHECK(same_bits(F::add(x, tmod::c<1, 2>), F::add(x, 0.5f)));
  // A scalar is a rank-0 operand: the result keeps the tensor's shape, even when it is rank 0.
  const Tensor r0 = F::add(tmod::scalar_tensor(2.f), 1.5f);
  CHECK(r0.shape() == Shape{});
  CHECK(r0.item() == 3.5f);
}

TEST_CASE("functional: rank-0 tensors") {
  const Tensor a = tmod::scalar_tensor(-2.5f), b = tmod::scalar_tensor(4.f);
  const Tensor sum = F::add(a, b);
  CHECK(sum.shape() == Shape{});
  CHECK(sum.item() == 1.5f);
  CHECK(F::relu(a).shape() == Shape{});
  CHECK(F::relu(a).item() == 0.f);
  CHECK(F::relu6(b).item() == 4.f);
  CHECK(F::exp(tmod::scalar_tensor(0.f)).item() == 1.f);
  // rank 0 broadcasts against any shape, on either side
  const Tensor v = tmod::tensor({1.f, 2.f, 3.f});
  const Tensor left = F::div(b, v), right = F::minimum(v, a);
  CHECK(left.shape() == Shape{3});
  CHECK(right.shape() == Shape{3});
  for (std::int64_t i = 0; i < 3; ++i) {
    CHECK(left.at({i}) == 4.f / v.at({i}));
    CHECK(right.at({i}) == -2.5f);
  }
}

TEST_CASE("functional: empty dimensions") {
  const Tensor e = tmod::zeros({3, 0, 2});
  for (const Tensor& y : {F::relu(e), F::exp(e), F::tanh(e), F::neg(e)}) {
    CHECK(y.shape() == Shape{3, 0, 2});
    CHECK(y.numel() == 0);
  }
  CHECK(F::add(tmod::zeros({0, 4}), tmod::ones({1, 4})).shape() == Shape{0, 4});
  CHECK(F::mul(tmod::zeros({2, 0}), tmod::ones({2, 1})).shape() == Shape{2, 0});
  CHECK(F::sub(tmod::zeros({0}), 1.f).shape() == Shape{0});
  CHECK(F::maximum(tmod::scalar_tensor(1.f), tmod::zeros({5, 0})).shape() == Shape{5, 0});
}

TEST_CASE("functional: results are new tensors; inputs are left unchanged") {
  const Tensor x = seeded({4, 5}, 11);
  const Tensor before = x.clone();
  const Tensor y = F::relu(x), z = F::add(x, x);
  CHECK_FALSE(y.shares_storage_with(x));
  CHECK_FALSE(z.shares_storage_with(x));
  CHECK(same_bits(x, before));
}

TEST_CASE("functional: NaN and infinities propagate as in PyTorch") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = tmod::tensor({nan, inf, -inf, 0.f, -0.f});
  const Tensor relu = F::relu(x), ex = F::exp(x), sig = F::sigmoid(x), th = F::tanh(x);
  CHECK(std::isnan(relu.at({0})));
  CHECK(relu.at({1}) == inf);
  CHECK(relu.at({2}) == 0.f);
  CHECK(ex.at({1}) == inf);
  CHECK(ex.at({2}) == 0.f);
  CHECK(ex.at({3}) == 1.f);
  CHECK(sig.at({1}) == 1.f);
  CHECK(sig.at({2}) == 0.f);
  CHECK(th.at({1}) == 1.f);
  CHECK(th.at({2}) == -1.f);
  CHECK(std::isnan(F::maximum(x, 1.f).at({0})));
  CHECK(std::isnan(F::minimum(1.f, x).at({0})));
}

}  // namespace

}  // namespace tmod_test_functional_elementwise
