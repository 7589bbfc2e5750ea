// sum, mean, max and min against the PyTorch goldens, and against a float64 loop over the input's
// multi-indices for every set of axes of a rank-4 input; empty reductions, NaN, errors, shapes.
#include "functional/golden_case.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/reduce.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tmod_test_functional_reduce {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

// One float32 rounding of a float64 sum (mean: and a division); max and min are exact.
constexpr double rtol = 2e-6, atol = 1e-6;

template <class Op>
void run_goldens(const char* op, Op f) {
  const std::size_t count = golden_case::for_each_case(op, [&](const std::string& name, auto& args) {
    const F::reduce_params p{.axis = args.optional_list("axis").value_or(F::int_list{}),
                             .keepdims = args.flag("keepdims", false)};
    const auto in = golden_case::inputs(name, 1, 1);
    golden::check_close(f(in[0], p), golden::load(name, "out"), rtol, atol, name);
  });
  CHECK(count >= 13);
}

TEST_CASE("functional: sum, mean, max and min match the goldens") {
  run_goldens("sum", [](const Tensor& x, const F::reduce_params& p) { return F::sum(x, p); });
  run_goldens("mean", [](const Tensor& x, const F::reduce_params& p) { return F::mean(x, p); });
  run_goldens("max", [](const Tensor& x, const F::reduce_params& p) { return F::max(x, p); });
  run_goldens("min", [](const Tensor& x, const F::reduce_params& p) { return F::min(x, p); });
}

enum class kind { sum, mean, max, min };

/// The reduction by a loop over every input element's multi-index, in float64.
Tensor reference(const Tensor& x, unsigned mask, bool keepdims, kind k) {
  const Shape& s = x.shape();
  Shape kept, out_shape;
  for (std::size_t i = 0; i < s.rank(); ++i) {
    const bool reduced = (mask >> i) & 1U;
    kept.push_back(reduced ? 1 : s[i]);
    if (!reduced || keepdims) out_shape.push_back(reduced ? 1 : s[i]);
  }
  const double start = k == kind::max   ? -std::numeric_limits<double>::infinity()
                       : k == kind::min ? std::numeric_limits<double>::infinity()
                                        : 0.0;
  std::vector<double> acc(static_cast<std::size_t>(kept.numel()), start);
  std::vector<std::int64_t> idx(s.rank(), 0);
  for (std::int64_t flat = 0; flat < s.numel(); ++flat) {
    std::int64_t rest = flat, o = 0;
    for (std::size_t i = s.rank(); i-- > 0;) {
      idx[i] = rest % s[i];
      rest /= s[i];
    }
    for (std::size_t i = 0; i < s.rank(); ++i) o = o * kept[i] + (((mask >> i) & 1U) ? 0 : idx[i]);
    const double v = x.data<float>()[flat];
    double& a = acc[static_cast<std::size_t>(o)];
    a = k == kind::max ? std::max(a, v) : k == kind::min ? std::min(a, v) : a + v;
  }
  const double count = static_cast<double>(s.numel()) / static_cast<double>(kept.numel());
  Tensor y = Tensor::empty(out_shape);
  for (std::size_t i = 0; i < acc.size(); ++i)
    y.data<float>()[i] = static_cast<float>(k == kind::mean ? acc[i] / count : acc[i]);
  return y;
}

F::int_list axes_of(unsigned mask, std::size_t rank, bool negative) {
  F::int_list l;
  for (std::size_t i = 0; i < rank; ++i)
    if ((mask >> i) & 1U) l.push_back(static_cast<std::int64_t>(i) - (negative ? static_cast<std::int64_t>(rank) : 0));
  return l;
}

TEST_CASE("functional: reductions over every set of axes against a float64 loop") {
  const Tensor x = tmod::randn({3, 5, 1, 7}, 11);
  for (unsigned mask = 1; mask < 16; ++mask)
    for (bool keep : {false, true}) {
      const F::reduce_params p{axes_of(mask, 4, (mask & 1U) != 0), keep};  // some axes negative
      CAPTURE(F::repr(p.axis));
      CAPTURE(keep);
      golden::check_close(F::sum(x, p), reference(x, mask, keep, kind::sum), rtol, atol, "sum");
      golden::check_close(F::mean(x, p), reference(x, mask, keep, kind::mean), rtol, atol, "mean");
      golden::check_close(F::max(x, p), reference(x, mask, keep, kind::max), 0, 0, "max");
      golden::check_close(F::min(x, p), reference(x, mask, keep, kind::min), 0, 0, "min");
    }
  // No axes is every axis.
  golden::check_close(F::sum(x), reference(x, 15, false, kind::sum), rtol, atol, "sum()");
  golden::check_close(F::max(x, {.keepdims = true}), reference(x, 15, true, kind::max), 0, 0, "max(keepdims)");
  CHECK(F::mean(x, {}, true).shape() == Shape{1, 1, 1, 1});
  CHECK(F::mean(x, {2, 3}, true).shape() == Shape{3, 5, 1, 1});
  CHECK(F::min(x, {-1}).shape() == Shape{3, 5, 1});
}

TEST_CASE("functional: sum and mean accumulate in double") {
  Tensor x = tmod::full({3, 4097}, 1.f);
  for (std::int64_t r = 0; r < 3; ++r) x.data<float>()[r * 4097] = 1e8f;  // float32 would drop the ones
  const Tensor s = F::sum(x, {1});
  for (std::int64_t r = 0; r < 3; ++r) CHECK(s.at({r}) == 1e8f + 4096.f);
  CHECK(F::mean(tmod::full({5, 3}, 0.1f), {0}).at({1}) == 0.1f);
}

TEST_CASE("functional: empty reductions, NaN and a scalar") {
  const Tensor empty = tmod::zeros({3, 0, 2});
  const Tensor s = F::sum(empty, {1});
  CHECK(s.shape() == Shape{3, 2});
  for (float v : s.values<float>()) CHECK(v == 0.f);
  const Tensor m = F::mean(empty, {1});
  CHECK(m.shape() == Shape{3, 2});
  for (float v : m.values<float>()) CHECK(std::isnan(v));
  CHECK(F::max(empty, {0}).shape() == Shape{0, 2});  // an empty result reduces no empty set
  CHECK_THROWS_WITH_AS((void)F::max(empty, {1}), doctest::Contains("math.max: axis=(1,) of an input of shape (3, 0, 2)"),
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS((void)F::min(empty), doctest::Contains("(3, 0, 2)"), tmod::shape_error);
  CHECK_THROWS_AS((void)F::min_fn::infer_shape({}, Shape{0}), tmod::shape_error);

  Tensor x = tmod::randn({2, 6}, 4);
  x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  const Tensor mx = F::max(x, {1}), mn = F::min(x, {0});
  CHECK(std::isnan(mx.at({0})));
  CHECK_FALSE(std::isnan(mx.at({1})));
  CHECK(std::isnan(mn.at({3})));
  CHECK_FALSE(std::isnan(mn.at({2})));

  const Tensor sc = tmod::scalar_tensor(-2.5f);
  CHECK(F::sum(sc).shape() == Shape{});
  CHECK(F::max(sc).item() == -2.5f);
  CHECK(F::mean(sc, {.keepdims = true}).item() == -2.5f);
}

TEST_CASE("functional: reduction axes are checked") {
  const Tensor x = tmod::zeros({2, 3, 4});
  CHECK_THROWS_WITH_AS((void)F::sum(x, {3}), doctest::Contains("math.sum: axis 3 of axis=(3,) is out of range for an input of shape (2, 3, 4)"),
                       tmod::value_error);
  CHECK_THROWS_WITH_AS((void)F::mean(x, {-4}), doctest::Contains("out of range"), tmod::value_error);
  CHECK_THROWS_WITH_AS((void)F::max(x, {1, -2}), doctest::Contains("math.max: axis=(1, -2) names axis 1 more than once (input of shape (2, 3, 4))"),
                       tmod::value_error);
  CHECK_THROWS_AS((void)F::min(tmod::scalar_tensor(1.f), {0}), tmod::value_error);
  CHECK_THROWS_AS((void)F::sum(Tensor::empty({2}, tmod::DType::int32)), tmod::error);
}

TEST_CASE("functional: reduction shapes are static, symbolic and costed") {
  static_assert(F::sum_fn::infer_shape({{1}, false}, Shape{2, 3, 4}) == Shape{2, 4});
  static_assert(F::mean_fn::infer_shape({{-1, 0}, true}, Shape{2, 3, 4}) == Shape{1, 3, 1});
  static_assert(F::max_fn::infer_shape({}, Shape{2, 3, 4}) == Shape{});
  const tmod::DimExpr n = tmod::DimExpr::symbol("N"), h = tmod::DimExpr::symbol("H");
  const tmod::ShapeDims x{{n, 8, h, h}, Shape{1, 8, 5, 5}};
  CHECK(tmod::to_string(F::mean_fn::infer_dims({{2, 3}, true}, x)) == "(N, 8, 1, 1)");
  CHECK(tmod::to_string(F::sum_fn::infer_dims({{-1}, false}, x)) == "(N, 8, H)");
  CHECK(tmod::to_string(F::min_fn::infer_dims({{0}, false}, x)) == "(8, H, H)");
  CHECK(F::mean_fn::cost({}, Shape{2, 3}, Shape{2, 3, 10}).flops == 66);
  CHECK(F::sum_fn::cost({}, Shape{2, 3}, Shape{2, 3, 10}).flops == 60);
}

}  // namespace

}  // namespace tmod_test_functional_reduce
