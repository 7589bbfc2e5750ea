#include <tracemod/kernels/layout.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace tmod_test_kernels_layout {

namespace {

namespace k = tracemod::kernels;
using tracemod::Shape;

std::vector<float> iota_values(std::int64_t count) {
  std::vector<float> v(static_cast<std::size_t>(count));
  std::iota(v.begin(), v.end(), 0.0f);  // every element distinct: a misplaced one cannot hide
  return v;
}

// y[j_0, ..., j_r-1] = x[i] with i_perm[d] = j_d, element by element.
std::vector<float> reference_transpose(const std::vector<float>& x, const Shape& in, std::span<const std::size_t> perm) {
  const std::size_t r = in.rank();
  Shape out;
  for (std::size_t d : perm) out.push_back(in[d]);
  std::vector<float> y(x.size());
  for (std::int64_t flat = 0; flat < out.numel(); ++flat) {
    std::array<std::int64_t, Shape::max_rank> j{}, i{};
    std::int64_t rest = flat;
    for (std::size_t d = r; d-- > 0;) {
      j[d] = rest % out[d];
      rest /= out[d];
    }
    for (std::size_t d = 0; d < r; ++d) i[perm[d]] = j[d];
    std::int64_t src = 0;
    for (std::size_t d = 0; d < r; ++d) src = src * in[d] + i[d];
    y[static_cast<std::size_t>(flat)] = x[static_cast<std::size_t>(src)];
  }
  return y;
}

void check_transpose(const Shape& in, std::span<const std::size_t> perm) {
  CAPTURE(in.to_string());
  std::string p;
  for (std::size_t d : perm) p += std::to_string(d) + " ";
  CAPTURE(p);
  const auto x = iota_values(in.numel());
  std::vector<float> y(x.size(), -1.0f);
  k::transpose(x.data(), in, perm, y.data());
  CHECK(y == reference_transpose(x, in, perm));
  Shape expected;
  for (std::size_t d : perm) expected.push_back(in[d]);
  CHECK(k::transposed_shape(in, perm) == expected);
}

void check_all_permutations(const Shape& in) {
  std::vector<std::size_t> perm(in.rank());
  std::iota(perm.begin(), perm.end(), std::size_t{0});
  do check_transpose(in, perm);
  while (std::next_permutation(perm.begin(), perm.end()));
}

}  // namespace

TEST_CASE("transpose: matches element-wise index arithmetic") {
  check_all_permutations(Shape{7, 13});
  check_all_permutations(Shape{17, 33});
  check_all_permutations(Shape{67, 45});  // several tiles, partial ones on both edges
  check_all_permutations(Shape{1, 5});
  check_all_permutations(Shape{3, 5, 7});
  check_all_permutations(Shape{2, 3, 4, 5});
  check_all_permutations(Shape{1, 3, 1, 5});  // size-1 dims are dropped before planning
  check_all_permutations(Shape{2, 1, 17, 19, 3});
  check_transpose(Shape{2, 3, 5, 7}, std::array<std::size_t, 4>{0, 2, 3, 1});  // NCHW -> NHWC
  check_transpose(Shape{2, 5, 7, 3}, std::array<std::size_t, 4>{0, 3, 1, 2});  // NHWC -> NCHW
  check_transpose(Shape{2, 3, 2, 3, 2, 3, 2}, std::array<std::size_t, 7>{6, 4, 2, 0, 5, 3, 1});
  check_transpose(Shape{11}, std::array<std::size_t, 1>{0});
  check_transpose(Shape{}, std::span<const std::size_t>{});
}

TEST_CASE("transpose: empty tensors and invalid permutations") {
  k::transpose(nullptr, Shape{0, 3}, std::array<std::size_t, 2>{1, 0}, nullptr);
  k::transpose(nullptr, Shape{4, 0, 2}, std::array<std::size_t, 3>{2, 0, 1}, nullptr);
  CHECK(k::transposed_shape(Shape{4, 0, 2}, std::array<std::size_t, 3>{2, 0, 1}) == Shape{2, 4, 0});
  using tracemod::value_error;
  float x = 0, y = 0;
  CHECK_THROWS_WITH_AS(k::transpose(&x, Shape{2, 3, 4}, std::array<std::size_t, 3>{1, 1, 0}, &y),
                       "transpose: (1, 1, 0) is not a permutation of the axes of shape (2, 3, 4)", value_error);
  CHECK_THROWS_AS(k::transpose(&x, Shape{2, 3}, std::array<std::size_t, 3>{0, 1, 2}, &y), value_error);
  CHECK_THROWS_AS(k::transpose(&x, Shape{2, 3}, std::array<std::size_t, 2>{0, 2}, &y), value_error);
  CHECK_THROWS_AS((void)k::transposed_shape(Shape{2, 3}, std::array<std::size_t, 1>{0}), value_error);
}

TEST_CASE("concat: along every axis, including empty inputs") {
  // Three inputs differing along `axis` only; values tagged by input and position.
  for (std::size_t axis = 0; axis < 3; ++axis) {
    CAPTURE(axis);
    const std::int64_t sizes[] = {2, 0, 3};
    std::vector<Shape> shapes;
    std::vector<std::vector<float>> data;
    for (std::size_t i = 0; i < 3; ++i) {
      Shape s{2, 3, 5};
      s[axis] = sizes[i];
      shapes.push_back(s);
      auto v = iota_values(s.numel());
      for (float& e : v) e += 1000.0f * static_cast<float>(i);
      data.push_back(v);
    }
    const std::array<const float*, 3> inputs = {data[0].data(), nullptr, data[2].data()};
    const Shape out = k::concat_shape(shapes.data(), 3, axis);
    Shape expected{2, 3, 5};
    expected[axis] = 5;
    CHECK(out == expected);
    std::vector<float> y(static_cast<std::size_t>(out.numel()), -1.0f);
    k::concat(inputs.data(), shapes.data(), 3, axis, y.data());
    // Reference: each output element picks its input by its coordinate along the axis.
    for (std::int64_t a = 0; a < out[0]; ++a)
      for (std::int64_t b = 0; b < out[1]; ++b)
        for (std::int64_t c = 0; c < out[2]; ++c) {
          std::array<std::int64_t, 3> idx{a, b, c};
          std::size_t input = 0;
          while (idx[axis] >= shapes[input][axis]) idx[axis] -= shapes[input++][axis];
          const Shape& s = shapes[input];
          const float expect = data[input][static_cast<std::size_t>((idx[0] * s[1] + idx[1]) * s[2] + idx[2])];
          CHECK(y[static_cast<std::size_t>((a * out[1] + b) * out[2] + c)] == expect);
        }
  }
}

TEST_CASE("concat: rank 1 and a single input") {
  const std::vector<float> a = {1, 2, 3}, b = {4, 5};
  const std::array<const float*, 2> inputs = {a.data(), b.data()};
  const std::array<Shape, 2> shapes = {Shape{3}, Shape{2}};
  std::vector<float> y(5);
  k::concat(inputs.data(), shapes.data(), 2, 0, y.data());
  CHECK(y == std::vector<float>{1, 2, 3, 4, 5});
  k::concat(inputs.data(), shapes.data(), 1, 0, y.data());
  CHECK(y == std::vector<float>{1, 2, 3, 4, 5});
}

TEST_CASE("concat: mismatched shapes, bad axis, no inputs") {
  using tracemod::shape_error;
  using tracemod::value_error;
  const std::array<Shape, 2> extents = {Shape{2, 3, 6}, Shape{2, 4, 5}};
  CHECK_THROWS_WITH_AS((void)k::concat_shape(extents.data(), 2, 1),
                       "concat: input 1 has shape (2, 4, 5) but input 0 has (2, 3, 6); shapes must match except "
                       "along axis 1",
                       shape_error);
  const std::array<Shape, 2> ranks = {Shape{2, 3}, Shape{2, 3, 1}};
  CHECK_THROWS_AS((void)k::concat_shape(ranks.data(), 2, 0), shape_error);
  CHECK_THROWS_WITH_AS((void)k::concat_shape(extents.data(), 2, 3), doctest::Contains("axis 3 is out of range"),
                       value_error);
  const std::array<Shape, 1> scalar = {Shape{}};
  CHECK_THROWS_AS((void)k::concat_shape(scalar.data(), 1, 0), value_error);
  CHECK_THROWS_AS(k::concat<float>(nullptr, nullptr, 0, 0, nullptr), value_error);
  float y = 0;
  const std::array<const float*, 2> none = {nullptr, nullptr};
  CHECK_THROWS_AS(k::concat(none.data(), extents.data(), 2, 2, &y), shape_error);
}

}  // namespace tmod_test_kernels_layout
