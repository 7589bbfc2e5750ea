// pad against the PyTorch goldens (constant with value 0 and 1.5, reflect, replicate, 3-D and 4-D,
// asymmetric and negative pads), hand-derived cases, and its errors.
#include "functional/golden_case.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/pad.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tmod_test_functional_pad {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

TEST_CASE("functional: pad matches the goldens") {
  const std::size_t count = golden_case::for_each_case("pad", [](const std::string& name, auto& args) {
    const F::int_list pads = args.required_list("pad");
    const std::string mode = args.text("mode", "constant");
    const double value = args.real("value", 0.0);
    const auto in = golden_case::inputs(name, 1, 1);
    golden::check_close(F::pad(in[0], pads, mode, value), golden::load(name, "out"), 0, 0, name);  // copies: exact
  });
  CHECK(count >= 11);
}

std::vector<float> values(const Tensor& t) {
  const auto v = t.values<float>();
  return {v.begin(), v.end()};
}

TEST_CASE("functional: pad by hand") {
  const Tensor x = tmod::arange(6).reshape({2, 3});  // [[0, 1, 2], [3, 4, 5]]
  CHECK(values(F::pad(x, {2, 1}, "reflect")) == std::vector<float>{2, 1, 0, 1, 2, 1, 5, 4, 3, 4, 5, 4});
  CHECK(values(F::pad(x, {1, 0}, "replicate")) == std::vector<float>{0, 0, 1, 2, 3, 3, 4, 5});
  CHECK(values(F::pad(x, {0, 1, 1, 0}, "constant", 1.5)) ==
        std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f, 0, 1, 2, 1.5f, 3, 4, 5, 1.5f});
  CHECK(values(F::pad(x, {-1, 0, 0, -1})) == std::vector<float>{1, 2});  // crops
  CHECK(values(F::pad(x, {1, 1, 1, 0}, "reflect")) ==
        std::vector<float>{4, 3, 4, 5, 4, 1, 0, 1, 2, 1, 4, 3, 4, 5, 4});
  CHECK(F::pad(x, {}).shape() == Shape{2, 3});
  CHECK(F::pad(tmod::zeros({0, 3}), {1, 1, 2, 0}).shape() == Shape{2, 5});

  const Tensor i = tmod::arange(0, 3, 1, tmod::int32);
  const Tensor pi = F::pad(i, {1, 2}, "constant", 7);
  CHECK(pi.dtype() == tmod::DType::int32);
  const auto iv = pi.values<std::int32_t>();
  CHECK(std::vector<std::int32_t>(iv.begin(), iv.end()) == std::vector<std::int32_t>{7, 0, 1, 2, 7, 7});
}

TEST_CASE("functional: pad refuses bad pads, naming the op, the pads and the shape") {
  const Tensor x = tmod::zeros({1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(F::pad(x, {4, 0}, "reflect"), doctest::Contains("nn.pad: pad (4, 0) (mode reflect) of an input of shape (1, 2, 3, 4): axis 3"),
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::pad(x, {0, 0, 0, 3}, "reflect"), doctest::Contains("axis 2 has extent 3"), tmod::shape_error);
  CHECK_NOTHROW(F::pad(x, {3, 3, 2, 2}, "reflect"));
  CHECK_THROWS_WITH_AS(F::pad(x, {1, 1, 1}), doctest::Contains("nn.pad: pad (1, 1, 1) must hold"), tmod::value_error);
  CHECK_THROWS_AS(F::pad(tmod::zeros({3}), {1, 1, 1, 1}), tmod::value_error);
  CHECK_THROWS_WITH_AS(F::pad(x, {1, 1}, "circular"), doctest::Contains("mode is 'circular'"), tmod::value_error);
  CHECK_THROWS_WITH_AS(F::pad(x, {-3, -2}), doctest::Contains("negative extent -1"), tmod::shape_error);
  CHECK_THROWS_AS(F::pad(tmod::zeros({2, 0}), {1, 0}, "replicate"), tmod::shape_error);
}

}  // namespace

}  // namespace tmod_test_functional_pad
