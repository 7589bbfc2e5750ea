#include <tracemod/kernels/softmax.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

namespace tmod_test_kernels_softmax {

namespace {

namespace k = tracemod::kernels;

struct dims {
  std::size_t outer, len, inner;
};

std::vector<float> random_values(std::size_t count, unsigned seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

// Softmax over the middle axis in double, shifted by the max as the definition allows.
std::vector<double> reference(const std::vector<float>& x, dims d) {
  std::vector<double> y(x.size());
  for (std::size_t o = 0; o < d.outer; ++o)
    for (std::size_t i = 0; i < d.inner; ++i) {
      const auto at = [&](std::size_t l) { return (o * d.len + l) * d.inner + i; };
      double m = -INFINITY;
      for (std::size_t l = 0; l < d.len; ++l) m = std::max(m, static_cast<double>(x[at(l)]));
      double sum = 0;
      for (std::size_t l = 0; l < d.len; ++l) sum += std::exp(x[at(l)] - m);
      for (std::size_t l = 0; l < d.len; ++l) y[at(l)] = std::exp(x[at(l)] - m) / sum;
    }
  return y;
}

void check_softmax(const std::vector<float>& x, dims d) {
  CAPTURE(d.outer);
  CAPTURE(d.len);
  CAPTURE(d.inner);
  std::vector<float> y(x.size());
  k::softmax(x.data(), y.data(), d.outer, d.len, d.inner);
  const auto ref = reference(x, d);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(std::abs(y[i] - ref[i]) <= 1e-6 * (1e-3 + ref[i]));
}

}  // namespace

TEST_CASE("softmax: matches the definition along the last, middle and first axis") {
  const dims shapes[] = {
      {1, 1, 1},  {4, 7, 1},   {3, 13, 1},  {2, 17, 1},   {2, 1000, 1},  // last axis: SIMD along the row
      {2, 7, 13}, {3, 5, 17},  {2, 3, 4},   {1, 1, 5},    {2, 33, 16},   // middle axis: SIMD across inner
      {1, 5, 7},  {1, 9, 100},                                           // first axis of [len, inner]
  };
  unsigned seed = 11;
  for (const dims d : shapes) check_softmax(random_values(d.outer * d.len * d.inner, seed++, -5.0f, 5.0f), d);
}

TEST_CASE("softmax: large inputs do not overflow") {
  // exp(1e4) is inf in float: only a max-shifted softmax stays finite.
  for (const dims d : {dims{3, 37, 1}, dims{2, 9, 21}, dims{1, 6, 1}}) {
    auto x = random_values(d.outer * d.len * d.inner, 5, 1e4f - 8.0f, 1e4f);
    x[0] = -1e4f;
    check_softmax(x, d);
    std::vector<float> y(x.size());
    k::softmax(x.data(), y.data(), d.outer, d.len, d.inner);
    for (float v : y) CHECK(std::isfinite(v));
  }
}

TEST_CASE("softmax: in place, -inf entries and NaN") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {1.0f, -inf, 2.0f, -inf, 3.0f, 0.5f, -1.0f, 4.0f, 2.5f, 1.5f, -inf, 0.0f, 7.0f, 1.0f,
                          2.0f, 3.0f, 4.0f, 5.0f};
  const dims d{1, x.size(), 1};
  const auto ref = reference(x, d);
  k::softmax(x.data(), x.data(), d.outer, d.len, d.inner);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(std::abs(x[i] - ref[i]) <= 1e-6 * (1e-3 + ref[i]));
  CHECK(x[1] == 0.0f);

  std::vector<float> col = random_values(3 * 19, 3, -1.0f, 1.0f);
  col[19 + 18] = std::numeric_limits<float>::quiet_NaN();  // row 1, last column (the scalar tail)
  k::softmax(col.data(), col.data(), 1, 3, 19);
  for (std::size_t l = 0; l < 3; ++l) {
    CHECK(std::isnan(col[l * 19 + 18]));
    CHECK_FALSE(std::isnan(col[l * 19]));
  }
}

TEST_CASE("softmax: empty extents succeed and write nothing") {
  const std::vector<float> x = random_values(4 * 5 * 3, 4, -1.0f, 1.0f);
  const std::vector<float> untouched(x.size(), 42.0f);
  std::vector<float> y = untouched;
  CHECK_NOTHROW(k::softmax(x.data(), y.data(), 0, 5, 3));
  CHECK_NOTHROW(k::softmax(x.data(), y.data(), 4, 0, 3));
  CHECK_NOTHROW(k::softmax(x.data(), y.data(), 4, 5, 0));
  CHECK(y == untouched);
}

}  // namespace tmod_test_kernels_softmax
