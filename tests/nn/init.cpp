// nn::init against PyTorch's definitions (torch.nn.init): fan_in, the fills, uniform_ and
// kaiming_uniform_ bounds, the generator argument, and the errors. Module constructors using them
// are covered in builtin_modules.cpp.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/init.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tmod_test_nn_init {

namespace {

namespace tmod = tracemod;
namespace init = tracemod::nn::init;

bool all_equal(const tmod::Tensor& t, float value) {
  return std::ranges::all_of(t.values<float>(), [=](float v) { return v == value; });
}

}  // namespace

TEST_CASE("init.fan_in: in_channels times the receptive field, as PyTorch computes it") {
  CHECK(init::fan_in(tmod::zeros({7, 5})) == 5);
  CHECK(init::fan_in(tmod::zeros({8, 4, 3, 2})) == 24);
  CHECK(init::fan_in(tmod::zeros({0, 4, 3, 3})) == 36);  // no rows: still defined, no division by 0
  CHECK(init::fan_in(tmod::zeros({6, 0})) == 0);
  CHECK_THROWS_WITH_AS((void)init::fan_in(tmod::zeros({})), doctest::Contains("() has no fan-in"),
                       tmod::value_error);
}

TEST_CASE("init: constant_, zeros_, ones_ fill every element") {
  tmod::Tensor t = tmod::randn({3, 5}, 1);
  init::constant_(t, -2.5);
  CHECK(all_equal(t, -2.5f));
  init::ones_(t);
  CHECK(all_equal(t, 1.f));
  init::zeros_(t);
  CHECK(all_equal(t, 0.f));
  tmod::Tensor ints = tmod::zeros({2}, tmod::DType::int32);
  CHECK_THROWS_AS(init::ones_(ints), tmod::dtype_error);
}

TEST_CASE("init.uniform_: values in [low, high), from the generator it is given") {
  tmod::Tensor a = tmod::zeros({4000}), b = tmod::zeros({4000});
  tmod::Generator g1(9), g2(9);
  init::uniform_(a, -0.5, 2.0, g1);
  init::uniform_(b, -0.5, 2.0, g2);
  CHECK(std::ranges::equal(a.values<float>(), b.values<float>()));
  const auto [lo, hi] = std::ranges::minmax(a.values<float>());
  CHECK(lo >= -0.5f);
  CHECK(hi < 2.0f);
  CHECK(lo < -0.49f);  // 4000 draws come within 0.4 % of each end
  CHECK(hi > 1.99f);
  double mean = 0;
  for (float v : a.values<float>()) mean += v;
  mean /= 4000;
  CHECK(std::abs(mean - 0.75) < 5 * 2.5 / std::sqrt(12.0 * 4000));  // 5 standard errors

  tmod::Tensor c = tmod::zeros({16});
  tmod::manual_seed(3);
  init::uniform_(c, 0, 1);  // the default generator
  tmod::Generator g3(3);
  tmod::Tensor d = tmod::zeros({16});
  init::uniform_(d, 0, 1, g3);
  CHECK(std::ranges::equal(c.values<float>(), d.values<float>()));

  const tmod::Tensor before = d.clone();
  CHECK_THROWS_WITH_AS(init::uniform_(d, 1.0, 0.0), doctest::Contains("low 1.000000 exceeds high 0.000000"),
                       tmod::value_error);
  CHECK(std::ranges::equal(d.values<float>(), before.values<float>()));  // unchanged
}

TEST_CASE("init.kaiming_uniform_: bound gain * sqrt(3 / fan_in), gain sqrt(2 / (1 + a^2))") {
  tmod::Generator g(1);
  tmod::Tensor w = tmod::zeros({64, 8, 3, 3});  // fan_in 72
  init::kaiming_uniform_(w, 1.0, g);            // gain 1: bound sqrt(3 / 72)
  const float bound = std::sqrt(3.f / 72.f);
  const auto [lo, hi] = std::ranges::minmax(w.values<float>());
  CHECK(lo >= -bound);
  CHECK(hi <= bound);
  CHECK(std::min(-lo, hi) > 0.99f * bound);  // 4608 draws

  tmod::Tensor empty_rows = tmod::zeros({0, 4});
  CHECK_NOTHROW(init::kaiming_uniform_(empty_rows, 0.0, g));
  tmod::Tensor empty_cols = tmod::zeros({4, 0});
  CHECK_NOTHROW(init::kaiming_uniform_(empty_cols, 0.0, g));

  // default_layer_init_: weight bound 1/sqrt(fan_in) (a = sqrt 5), bias the same; no bias is fine.
  tmod::Tensor weight = tmod::zeros({10, 50}), bias = tmod::zeros({10}), none;
  init::default_layer_init_(weight, bias, g);
  const float layer_bound = 1.f / std::sqrt(50.f);
  CHECK(std::ranges::all_of(weight.values<float>(), [=](float v) { return std::abs(v) <= layer_bound; }));
  CHECK(std::ranges::all_of(bias.values<float>(), [=](float v) { return std::abs(v) <= layer_bound; }));
  CHECK_FALSE(all_equal(bias, 0.f));
  CHECK_NOTHROW(init::default_layer_init_(weight, none, g));
}

}  // namespace tmod_test_nn_init
