#include <tracemod/kernels/reduce.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

namespace tmod_test_kernels_reduce {

namespace {

namespace k = tracemod::kernels;

struct dims {
  std::size_t outer, len, inner;
};

std::vector<float> random_values(std::size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

enum class kind { sum, mean, max, min };

// Plain loop over [outer, len, inner], in double.
std::vector<double> reference(const std::vector<float>& x, dims d, kind op) {
  std::vector<double> y(d.outer * d.inner);
  for (std::size_t o = 0; o < d.outer; ++o)
    for (std::size_t i = 0; i < d.inner; ++i) {
      double acc = op == kind::max ? -INFINITY : op == kind::min ? INFINITY : 0.0;
      for (std::size_t l = 0; l < d.len; ++l) {
        const double v = x[(o * d.len + l) * d.inner + i];
        if (op == kind::max) acc = std::max(acc, v);
        else if (op == kind::min) acc = std::min(acc, v);
        else acc += v;
      }
      y[o * d.inner + i] = op == kind::mean ? acc / static_cast<double>(d.len) : acc;
    }
  return y;
}

std::vector<float> run(const std::vector<float>& x, dims d, kind op) {
  std::vector<float> y(d.outer * d.inner, -123.0f);
  switch (op) {
    case kind::sum: k::reduce_sum(x.data(), y.data(), d.outer, d.len, d.inner); break;
    case kind::mean: k::reduce_mean(x.data(), y.data(), d.outer, d.len, d.inner); break;
    case kind::max: k::reduce_max(x.data(), y.data(), d.outer, d.len, d.inner); break;
    case kind::min: k::reduce_min(x.data(), y.data(), d.outer, d.len, d.inner); break;
  }
  return y;
}

}  // namespace

TEST_CASE("reduce: sum, mean, max, min match a scalar loop over [outer, len, inner]") {
  const dims shapes[] = {{1, 1, 1},    {3, 7, 1},   {2, 13, 1},  {1, 1000, 1}, {4, 3001, 1}, {2, 17, 5},
                         {3, 7, 13},   {2, 5, 16},  {1, 300, 33}, {2, 200, 300}, {5, 1, 17},  {1, 129, 257}};
  unsigned seed = 1;
  for (const dims d : shapes) {
    const auto x = random_values(d.outer * d.len * d.inner, seed++);
    for (kind op : {kind::sum, kind::mean, kind::max, kind::min}) {
      CAPTURE(d.outer);
      CAPTURE(d.len);
      CAPTURE(d.inner);
      CAPTURE(static_cast<int>(op));
      const auto y = run(x, d, op);
      const auto ref = reference(x, d, op);
      for (std::size_t i = 0; i < y.size(); ++i) {
        // Sums of len values in [-2, 2]: the error scales with the magnitude of the terms.
        const double scale = op == kind::sum ? std::sqrt(static_cast<double>(d.len)) : 1.0;
        CHECK(std::abs(y[i] - ref[i]) <= 1e-6 * (scale + std::abs(ref[i])));
      }
    }
  }
}

TEST_CASE("reduce: long sums stay accurate in both layouts") {
  // 0.1f added 10^6 times drifts by about 1% in a plain float accumulator.
  const std::size_t len = 1'000'000;
  const std::vector<float> x(len * 3, 0.1f);
  const double exact = static_cast<double>(0.1f) * len;
  float row = 0;
  k::reduce_sum(x.data(), &row, 1, len, 1);
  CHECK(std::abs(row - exact) <= 1e-6 * exact);
  std::vector<float> cols(3);
  k::reduce_sum(x.data(), cols.data(), 1, len, 3);
  for (float c : cols) CHECK(std::abs(c - exact) <= 1e-6 * exact);
  k::reduce_mean(x.data(), cols.data(), 1, len, 3);
  for (float c : cols) CHECK(c == doctest::Approx(0.1f).epsilon(1e-6));
}

TEST_CASE("reduce: max and min propagate NaN wherever it sits") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t inner : {std::size_t{1}, std::size_t{19}}) {
    for (std::size_t pos : {std::size_t{0}, std::size_t{5}, std::size_t{40}}) {
      const std::size_t len = 41;
      auto x = random_values(len * inner, 7);
      x[pos * inner + inner - 1] = nan;  // the last column, also reached by the scalar tail
      std::vector<float> y(inner);
      k::reduce_max(x.data(), y.data(), 1, len, inner);
      CHECK(std::isnan(y[inner - 1]));
      k::reduce_min(x.data(), y.data(), 1, len, inner);
      CHECK(std::isnan(y[inner - 1]));
      if (inner > 1) CHECK_FALSE(std::isnan(y[0]));
    }
  }
}

TEST_CASE("reduce: empty extents") {
  std::vector<float> y(3, -1.0f);
  k::reduce_sum(nullptr, y.data(), 3, 0, 1);
  for (float v : y) CHECK(v == 0.0f);
  k::reduce_mean(nullptr, y.data(), 1, 0, 3);
  for (float v : y) CHECK(std::isnan(v));
  CHECK_THROWS_WITH_AS(k::reduce_max(nullptr, y.data(), 1, 0, 3), doctest::Contains("length 0"),
                       tracemod::value_error);
  CHECK_THROWS_AS(k::reduce_min(nullptr, y.data(), 3, 0, 1), tracemod::value_error);
  // Nothing to write: no error, no write.
  const std::vector<float> x(10, 1.0f), untouched(3, 42.0f);
  y = untouched;
  CHECK_NOTHROW(k::reduce_max(x.data(), y.data(), 0, 0, 3));
  CHECK_NOTHROW(k::reduce_min(x.data(), y.data(), 2, 0, 0));
  CHECK_NOTHROW(k::reduce_sum(x.data(), y.data(), 0, 5, 2));
  CHECK(y == untouched);
}

}  // namespace tmod_test_kernels_reduce
