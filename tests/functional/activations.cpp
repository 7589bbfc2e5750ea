// gelu (erf and tanh forms), silu, hardswish, hardsigmoid, leaky_relu and erf in eager mode, against
// double-precision scalar loops of PyTorch's formulas and against PyTorch's goldens (tests/data/gelu,
// gelu_tanh, silu, hardswish, hardsigmoid, leaky_relu), and their bad input.
#include "functional/golden_case.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>

namespace tmod_test_functional_activations {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Tensor;

/// 37 elements (a vector and a tail) over the bends of every activation, with -3 .. 3 exactly.
Tensor input() {
  Tensor x = tmod::uniform({37}, -6.f, 6.f, 11);
  float* p = x.data<float>();
  p[0] = -3.f, p[1] = 3.f, p[2] = 0.f, p[3] = -0.f, p[4] = 1e-3f, p[5] = -1e-3f, p[6] = -9.f, p[7] = 9.f;
  return x;
}

/// Every element of y within `rel` (relative to max(|ref|, 1e-6)) of ref(x) computed in double.
void check_against(const Tensor& x, const Tensor& y, const std::function<double(double)>& ref, double rel) {
  REQUIRE(y.shape() == x.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double want = ref(x.data<float>()[i]);
    const double got = y.data<float>()[i];
    CAPTURE(x.data<float>()[i]);
    CHECK(std::abs(got - want) <= rel * std::max(std::abs(want), 1e-6));
  }
}

double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}
double relu6(double x) { return std::min(std::max(x, 0.0), 6.0); }

}  // namespace

TEST_CASE("functional: gelu, silu, hardswish, hardsigmoid, leaky_relu and erf follow PyTorch's formulas") {
  const Tensor x = input();
  check_against(x, F::gelu(x), gelu_erf, 1e-6);
  check_against(x, F::gelu(x, {.approximate = "none"}), gelu_erf, 1e-6);
  check_against(x, F::gelu(x, {.approximate = "tanh"}), gelu_tanh, 1e-6);
  check_against(x, F::silu(x), [](double v) { return v / (1.0 + std::exp(-v)); }, 1e-6);
  check_against(x, F::hardsigmoid(x), [](double v) { return relu6(v + 3.0) / 6.0; }, 1e-6);
  check_against(x, F::hardswish(x), [](double v) { return v * relu6(v + 3.0) / 6.0; }, 1e-6);
  check_against(x, F::leaky_relu(x), [](double v) { return v > 0 ? v : 0.01 * v; }, 1e-6);
  check_against(x, F::leaky_relu(x, 0.2), [](double v) { return v > 0 ? v : 0.2 * v; }, 1e-6);
  check_against(x, F::erf(x), [](double v) { return std::erf(v); }, 1e-6);
  // Hand-computed: the bends of the hard activations, and NaN passing through.
  const Tensor bends = tmod::tensor({-3.f, 3.f, 0.f, std::numeric_limits<float>::quiet_NaN()});
  const Tensor hs = F::hardsigmoid(bends), hw = F::hardswish(bends), lr = F::leaky_relu(bends);
  CHECK(hs.at({0}) == 0.f);
  CHECK(hs.at({1}) == 1.f);
  CHECK(hs.at({2}) == 0.5f);
  CHECK(hw.at({0}) == 0.f);
  CHECK(hw.at({1}) == 3.f);
  CHECK(std::isnan(hw.at({3})));
  CHECK(std::isnan(lr.at({3})));
  CHECK(std::isnan(F::gelu(bends).at({3})));
}

TEST_CASE("functional: the activations match PyTorch's float64 goldens rounded to float32") {
  // gelu rounds its double result once; the others compute in float32 (sigmoid's exp, a division).
  const auto run = [](std::string_view op, const auto& f, double rtol) {
    return golden_case::for_each_case(op, [&](const std::string& name, golden_case::Args&) {
      const auto in = golden_case::inputs(name, 1, 1);
      golden::check_close(f(in[0]), golden::load(name, "out"), rtol, 1e-7, name);
    });
  };
  CHECK(run("gelu", [](const Tensor& x) { return F::gelu(x); }, 1e-6) == 6);
  CHECK(run("gelu_tanh", [](const Tensor& x) { return F::gelu(x, {.approximate = "tanh"}); }, 1e-6) == 6);
  CHECK(run("silu", [](const Tensor& x) { return F::silu(x); }, 1e-6) == 6);
  CHECK(run("hardswish", [](const Tensor& x) { return F::hardswish(x); }, 1e-6) == 6);
  CHECK(run("hardsigmoid", [](const Tensor& x) { return F::hardsigmoid(x); }, 1e-6) == 6);
  CHECK(run("leaky_relu", [](const Tensor& x) { return F::leaky_relu(x); }, 1e-6) == 6);
}

TEST_CASE("functional: leaky_relu takes a slope tensor that broadcasts with the input") {
  const Tensor x = tmod::tensor({{-1.f, 2.f}, {-3.f, -4.f}});
  const Tensor y = F::leaky_relu(x, tmod::tensor({0.5f, 0.25f}));
  CHECK(y.at({0, 0}) == -0.5f);
  CHECK(y.at({0, 1}) == 2.f);
  CHECK(y.at({1, 0}) == -1.5f);
  CHECK(y.at({1, 1}) == -1.f);
}

TEST_CASE("functional: the activations refuse int32 and an unknown gelu approximation, naming the op") {
  const Tensor i = tmod::tensor({1, 2});
  CHECK_THROWS_AS(F::silu(i), tmod::dtype_error);
  CHECK_THROWS_AS(F::gelu(i), tmod::dtype_error);
  CHECK_THROWS_AS(F::leaky_relu(i), tmod::dtype_error);
  try {
    (void)F::gelu(input(), {.approximate = "sigmoid"});
    FAIL("expected value_error");
  } catch (const tmod::value_error& e) {
    CHECK(std::string(e.what()).find("nn.gelu") != std::string::npos);
    CHECK(std::string(e.what()).find("sigmoid") != std::string::npos);
  }
}

}  // namespace tmod_test_functional_activations
