// The statistics of randn and uniform. Many tests compare a kernel with a scalar loop on random
// inputs; if the generator degraded (constant, short period, wrong range) those tests would still
// pass while testing little. Bounds are 5 standard errors of each statistic for n draws, derived
// from the distribution's moments, so a correct generator passes for any seed.
#include <tracemod/core/factories.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <set>
#include <span>

namespace tmod_test_core_random {

namespace {

namespace tmod = tracemod;

constexpr std::int64_t n = 200000;
const double root_n = std::sqrt(static_cast<double>(n));

struct moments {
  double mean = 0, var = 0, m4 = 0, lag1 = 0;  // lag1: correlation of consecutive draws
};

moments moments_of(std::span<const float> v) {
  moments m;
  for (float x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  double cov = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double d = v[i] - m.mean;
    m.var += d * d;
    m.m4 += d * d * d * d;
    if (i + 1 < v.size()) cov += d * (v[i + 1] - m.mean);
  }
  m.var /= static_cast<double>(v.size());
  m.m4 /= static_cast<double>(v.size());
  m.lag1 = cov / static_cast<double>(v.size() - 1) / m.var;
  return m;
}

}  // namespace

TEST_CASE("randn: standard normal moments, tails and independence of consecutive draws") {
  for (std::uint64_t seed : {0u, 1u, 12345u}) {
    INFO("seed " << seed);
    const tmod::Tensor t = tmod::randn({n}, seed);
    const auto v = t.values<float>();
    const moments m = moments_of(v);
    CHECK(std::abs(m.mean) < 5 / root_n);                         // sd of the mean: 1/sqrt(n)
    CHECK(std::abs(m.var - 1) < 5 * std::sqrt(2.0) / root_n);     // sd: sqrt((E x^4 - 1) / n)
    CHECK(std::abs(m.m4 - 3) < 5 * std::sqrt(96.0) / root_n);     // sd: sqrt((E x^8 - 9) / n)
    CHECK(std::abs(m.lag1) < 5 / root_n);                         // Box-Muller pairs are independent
    // P(|x| < 1) = erf(1/sqrt 2); P(|x| > 3) = erfc(3/sqrt 2).
    const double p1 = std::erf(1 / std::sqrt(2.0)), p3 = std::erfc(3 / std::sqrt(2.0));
    const auto within1 = std::count_if(v.begin(), v.end(), [](float x) { return std::abs(x) < 1.f; });
    const auto beyond3 = std::count_if(v.begin(), v.end(), [](float x) { return std::abs(x) > 3.f; });
    CHECK(std::abs(static_cast<double>(within1) / n - p1) < 5 * std::sqrt(p1 * (1 - p1)) / root_n);
    CHECK(std::abs(static_cast<double>(beyond3) / n - p3) < 5 * std::sqrt(p3 * (1 - p3)) / root_n);
    CHECK(std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); }));
  }
}

TEST_CASE("uniform: inside [low, high), flat moments, spread over the whole range") {
  const float low = -3.f, high = 5.f;
  const double width = high - low;
  for (std::uint64_t seed : {0u, 7u}) {
    INFO("seed " << seed);
    const tmod::Tensor t = tmod::uniform({n}, low, high, seed);
    const auto v = t.values<float>();
    CHECK(std::all_of(v.begin(), v.end(), [&](float x) { return x >= low && x < high; }));
    const moments m = moments_of(v);
    // Variance width^2/12, fourth central moment width^4/80.
    CHECK(std::abs(m.mean - (low + high) / 2.0) < 5 * width / std::sqrt(12.0) / root_n);
    const double var = width * width / 12, m4 = std::pow(width, 4) / 80;
    CHECK(std::abs(m.var - var) < 5 * std::sqrt(m4 - var * var) / root_n);
    CHECK(std::abs(m.lag1) < 5 / root_n);
    // Each of 16 equal bins holds n/16 draws within 5 binomial standard deviations.
    std::array<std::int64_t, 16> bins{};
    for (float x : v) ++bins[static_cast<std::size_t>(std::min(15.0, (x - low) / width * 16))];
    const double expected = n / 16.0, sd = std::sqrt(n * (1 / 16.0) * (15 / 16.0));
    for (std::int64_t b : bins) CHECK(std::abs(static_cast<double>(b) - expected) < 5 * sd);
    // 200000 draws of a 24-bit grid: nearly all distinct.
    CHECK(std::set<float>(v.begin(), v.end()).size() > static_cast<std::size_t>(0.99 * n));
  }
}

TEST_CASE("randn, uniform: the same seed gives the same tensor, another seed another") {
  const tmod::Tensor a = tmod::randn({1000}, 4), b = tmod::randn({1000}, 4), c = tmod::randn({1000}, 5);
  CHECK(std::ranges::equal(a.values<float>(), b.values<float>()));
  CHECK_FALSE(std::ranges::equal(a.values<float>(), c.values<float>()));
  const tmod::Tensor u = tmod::uniform({1000}, 0.f, 1.f, 4), w = tmod::uniform({1000}, 0.f, 1.f, 4);
  CHECK(std::ranges::equal(u.values<float>(), w.values<float>()));
}

}  // namespace tmod_test_core_random
