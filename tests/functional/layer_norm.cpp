// layer_norm and group_norm against the PyTorch goldens (1-D, 2-D and 3-D normalized shapes, with
// and without weight and bias; 1, 2 and C groups), a float64 scalar loop, the same bits at any
// thread count, and their errors.
#include "functional/golden_case.hpp"
#include "thread_counts.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/layer_norm.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace tmod_test_functional_layer_norm {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

// Statistics over up to 300 float32 values; outputs are O(1).
constexpr double rtol = 1e-5, atol = 1e-5;

TEST_CASE("functional: layer_norm matches the goldens") {
  const std::size_t count = golden_case::for_each_case("layer_norm", [](const std::string& name, auto& args) {
    const F::int_list shape = args.required_list("normalized_shape");
    const double eps = args.real("eps", 1e-5);
    const auto in = golden_case::inputs(name, 1, 3);
    REQUIRE_MESSAGE(in.size() != 2, name << ": weight without bias");
    const Tensor y = in.size() == 3 ? F::layer_norm(in[0], shape, in[1], in[2], eps) : F::layer_norm(in[0], shape, tmod::none, tmod::none, eps);
    golden::check_close(y, golden::load(name, "out"), rtol, atol, name);
  });
  CHECK(count >= 6);
}

TEST_CASE("functional: group_norm matches the goldens") {
  const std::size_t count = golden_case::for_each_case("group_norm", [](const std::string& name, auto& args) {
    const std::int64_t groups = args.integer("num_groups", 1);
    const auto in = golden_case::inputs(name, 1, 3);
    REQUIRE_MESSAGE(in.size() != 2, name << ": weight without bias");
    const Tensor y = in.size() == 3 ? F::group_norm(in[0], groups, in[1], in[2]) : F::group_norm(in[0], groups);
    golden::check_close(y, golden::load(name, "out"), rtol, atol, name);
  });
  CHECK(count >= 6);
}

/// group_norm in float64 by its definition: groups of C / G channels of each sample.
std::vector<double> group_norm_reference(const Tensor& x, std::int64_t groups, const Tensor* w, const Tensor* b, double eps) {
  const auto v = x.values<float>();
  const std::int64_t n = x.size(0), c = x.size(1), s = x.numel() / (n * c), per = c / groups * s;
  std::vector<double> y(v.size());
  for (std::int64_t g = 0; g < n * groups; ++g) {
    double mean = 0, var = 0;
    for (std::int64_t i = 0; i < per; ++i) mean += v[static_cast<std::size_t>(g * per + i)];
    mean /= static_cast<double>(per);
    for (std::int64_t i = 0; i < per; ++i) var += std::pow(v[static_cast<std::size_t>(g * per + i)] - mean, 2);
    var /= static_cast<double>(per);
    for (std::int64_t i = 0; i < per; ++i) {
      const std::int64_t ch = (g % groups) * (c / groups) + i / s;
      const double scale = w ? w->values<float>()[static_cast<std::size_t>(ch)] : 1.0;
      const double shift = b ? b->values<float>()[static_cast<std::size_t>(ch)] : 0.0;
      y[static_cast<std::size_t>(g * per + i)] = (v[static_cast<std::size_t>(g * per + i)] - mean) / std::sqrt(var + eps) * scale + shift;
    }
  }
  return y;
}

void check_against(const Tensor& got, const std::vector<double>& want) {
  const auto g = got.values<float>();
  REQUIRE(g.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(g[i] == doctest::Approx(want[i]).epsilon(1e-5));
}

TEST_CASE("functional: group_norm and layer_norm against a float64 loop, with the weight alone and odd sizes") {
  const Tensor x = tmod::uniform({3, 6, 3, 1}, -4.f, 5.f, 11);
  const Tensor w = tmod::uniform({6}, 0.5f, 2.f, 12), b = tmod::uniform({6}, -1.f, 1.f, 13);
  check_against(F::group_norm(x, 3, w, tmod::none, 1e-3), group_norm_reference(x, 3, &w, nullptr, 1e-3));
  check_against(F::group_norm(x, 2, tmod::none, b), group_norm_reference(x, 2, nullptr, &b, 1e-5));
  // layer_norm over the last three axes of (3, 6, 3, 1) is group_norm with one group and no affine
  check_against(F::layer_norm(x, {6, 3, 1}), group_norm_reference(x, 1, nullptr, nullptr, 1e-5));
  // a constant row normalises to 0 (then the bias), not NaN
  const Tensor same = tmod::full({2, 5}, 3.f);
  const Tensor y = F::layer_norm(same, {5}, tmod::full({5}, 2.f), tmod::full({5}, 0.25f));
  for (float v : y.values<float>()) CHECK(v == 0.25f);
  CHECK(F::layer_norm(tmod::zeros({0, 4}), {4}).shape() == Shape{0, 4});
  CHECK(F::group_norm(tmod::zeros({2, 4, 0}), 2).shape() == Shape{2, 4, 0});
}

TEST_CASE("functional: layer_norm and group_norm give the same bits at 1 to 4 threads") {
  const Tensor x = tmod::uniform({4, 8, 5, 5}, -2.f, 2.f, 21);
  const Tensor w = tmod::uniform({5, 5}, 0.5f, 1.5f, 22), b = tmod::uniform({5, 5}, -1.f, 1.f, 23);
  const auto values = [](const Tensor& t) { return std::vector<float>(t.values<float>().begin(), t.values<float>().end()); };
  thread_counts::check_bit_identical("layer_norm", [&] { return values(F::layer_norm(x, {5, 5}, w, b)); });
  thread_counts::check_bit_identical("group_norm", [&] { return values(F::group_norm(x, 4)); });
}

TEST_CASE("functional: layer_norm and group_norm refuse bad shapes, naming the op and the shapes") {
  const Tensor x = tmod::zeros({2, 6, 4});
  CHECK_THROWS_WITH_AS(F::layer_norm(x, {3}), "nn.layer_norm: normalized_shape (3,) is not the trailing dims of input (2, 6, 4)",
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::layer_norm(x, {2, 6, 4, 1}), doctest::Contains("(2, 6, 4, 1) is not the trailing dims"),
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::layer_norm(x, {6, 4}, tmod::ones({4})),
                       "nn.layer_norm: weight (4,) must have normalized_shape (6, 4) (input (2, 6, 4))", tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::layer_norm(x, {4}, tmod::ones({4}), tmod::ones({5})), doctest::Contains("bias (5,)"), tmod::shape_error);
  CHECK_THROWS_AS(F::layer_norm(x, {}), tmod::value_error);
  CHECK_THROWS_AS(F::layer_norm(x, {4}, tmod::none, tmod::none, -1.0), tmod::value_error);
  CHECK_THROWS_AS(F::layer_norm(tmod::zeros({2, 4}, tmod::int32), {4}), tmod::dtype_error);

  CHECK_THROWS_WITH_AS(F::group_norm(x, 4), "nn.group_norm: the 6 channels of input (2, 6, 4) do not divide into num_groups 4",
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::group_norm(x, 3, tmod::ones({3})), "nn.group_norm: weight (3,) must be (6,) for input (2, 6, 4)",
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::group_norm(tmod::zeros({6}), 2), doctest::Contains("input (6,) must have rank >= 2"), tmod::shape_error);
  CHECK_THROWS_AS(F::group_norm(x, 0), tmod::value_error);
}

}  // namespace

}  // namespace tmod_test_functional_layer_norm
