// softmax against the PyTorch goldens (axes, large values) and a float64 scalar loop; the default
// axis follows MegEngine: 0 for rank 0, 1 and 3, else 1.
#include "functional/golden_case.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/softmax.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace tmod_test_functional_softmax {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

// exp to a few ulps, one sum and one division; outputs lie in [0, 1].
constexpr double rtol = 2e-6, atol = 1e-9;

TEST_CASE("functional: softmax matches the goldens") {
  const std::size_t count = golden_case::for_each_case("softmax", [](const std::string& name, auto& args) {
    const F::softmax_fn::params p{.axis = args.optional_integer("axis")};
    const auto in = golden_case::inputs(name, 1, 1);
    golden::check_close(F::softmax(in[0], p), golden::load(name, "out"), rtol, atol, name);
  });
  CHECK(count >= 10);
}

Tensor reference_softmax(const Tensor& x, std::size_t axis) {
  const Shape& s = x.shape();
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < axis; ++i) outer *= s[i];
  for (std::size_t i = axis + 1; i < s.rank(); ++i) inner *= s[i];
  const std::int64_t len = s.rank() == 0 ? 1 : s[axis];
  Tensor y = tmod::Tensor::empty(s);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      const auto at = [&](std::int64_t k) { return (o * len + k) * inner + i; };
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (std::int64_t k = 0; k < len; ++k) mx = std::max(mx, static_cast<double>(x.data<float>()[at(k)]));
      for (std::int64_t k = 0; k < len; ++k) sum += std::exp(x.data<float>()[at(k)] - mx);
      for (std::int64_t k = 0; k < len; ++k)
        y.data<float>()[at(k)] = static_cast<float>(std::exp(x.data<float>()[at(k)] - mx) / sum);
    }
  return y;
}

TEST_CASE("functional: softmax default axis is MegEngine's") {
  const struct {
    Shape shape;
    std::size_t axis;
  } cases[] = {{{}, 0}, {{7}, 0}, {{3, 5}, 1}, {{3, 4, 5}, 0}, {{2, 3, 4, 5}, 1}, {{2, 3, 2, 2, 3}, 1}};
  std::uint64_t seed = 40;
  for (const auto& c : cases) {
    CAPTURE(c.shape.to_string());
    const Tensor x = tmod::randn(c.shape, seed++);
    const Tensor y = F::softmax(x);
    golden::check_close(y, reference_softmax(x, c.axis), rtol, atol);
    if (c.shape.rank() > 0) {
      const auto axis = static_cast<std::int64_t>(c.axis);
      golden::check_close(y, F::softmax(x, {.axis = axis}), 0, 0, "explicit axis");
      golden::check_close(y, F::softmax(x, {.axis = axis - static_cast<std::int64_t>(c.shape.rank())}), 0, 0,
                          "negative axis");
    }
  }
  CHECK(F::softmax(tmod::scalar_tensor(-3.f)).item() == 1.f);
}

TEST_CASE("functional: softmax along every axis at odd sizes, against a scalar loop") {
  const Tensor x = tmod::randn({3, 17, 5, 33}, 2);
  Tensor big = tmod::randn({3, 17, 5, 33}, 3);
  for (float& v : big.values<float>()) v *= 40.f;  // spreads exp over many binades
  for (std::int64_t axis = 0; axis < 4; ++axis) {
    CAPTURE(axis);
    const auto a = static_cast<std::size_t>(axis);
    golden::check_close(F::softmax(x, {.axis = axis}), reference_softmax(x, a), rtol, atol);
    golden::check_close(F::softmax(big, {.axis = axis}), reference_softmax(big, a), rtol, atol);
  }
}

TEST_CASE("functional: softmax is stable for large inputs and sums to one") {
  Tensor x = tmod::randn({4, 65}, 6);
  for (float& v : x.values<float>()) v = v * 300.f + 5000.f;
  const Tensor y = F::softmax(x, {.axis = 1});
  golden::check_close(y, reference_softmax(x, 1), rtol, atol);
  for (std::int64_t r = 0; r < 4; ++r) {
    double sum = 0;
    for (std::int64_t k = 0; k < 65; ++k) {
      CHECK(std::isfinite(y.at({r, k})));
      sum += y.at({r, k});
    }
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
  }
}

TEST_CASE("functional: softmax of empty tensors") {
  CHECK(F::softmax(tmod::zeros({0, 5}), {.axis = -1}).shape() == Shape{0, 5});
  CHECK(F::softmax(tmod::zeros({4, 0}), {.axis = 1}).shape() == Shape{4, 0});
  CHECK(F::softmax(tmod::zeros({2, 0, 3})).shape() == Shape{2, 0, 3});
}

}  // namespace

}  // namespace tmod_test_functional_softmax
