#include <tracemod/kernels/batch_norm.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace tmod_test_kernels_batch_norm {

namespace {

namespace k = tracemod::kernels;

struct dims {
  std::size_t n, c, s;
};

std::vector<float> random_values(std::size_t count, unsigned seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

// (x - mean) / sqrt(var + eps) * weight + bias, straight from the definition, in double.
std::vector<double> normalize(const std::vector<float>& x, dims d, const std::vector<double>& mean,
                              const std::vector<double>& var, const float* weight, const float* bias, double eps) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < d.n; ++i)
    for (std::size_t ch = 0; ch < d.c; ++ch)
      for (std::size_t j = 0; j < d.s; ++j) {
        const std::size_t at = (i * d.c + ch) * d.s + j;
        y[at] = (x[at] - mean[ch]) / std::sqrt(var[ch] + eps) * (weight ? weight[ch] : 1.0) + (bias ? bias[ch] : 0.0);
      }
  return y;
}

void check_close(const std::vector<float>& y, const std::vector<double>& ref, double tol) {
  REQUIRE(y.size() == ref.size());
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(std::abs(y[i] - ref[i]) <= tol * (1.0 + std::abs(ref[i])));
}

}  // namespace

TEST_CASE("batch_norm_inference: matches the definition, with and without affine parameters and activation") {
  const dims shapes[] = {{2, 3, 7}, {1, 5, 17}, {3, 4, 1}, {2, 37, 1}, {2, 64, 49}, {1, 2, 13}, {0, 3, 5}};
  unsigned seed = 21;
  for (const dims d : shapes) {
    CAPTURE(d.n);
    CAPTURE(d.c);
    CAPTURE(d.s);
    const auto x = random_values(d.n * d.c * d.s, seed++, -3.0f, 3.0f);
    const auto mean_f = random_values(d.c, seed++, -1.0f, 1.0f);
    const auto var_f = random_values(d.c, seed++, 0.1f, 4.0f);
    const auto weight = random_values(d.c, seed++, 0.5f, 2.0f);
    const auto bias = random_values(d.c, seed++, -1.0f, 1.0f);
    const std::vector<double> mean(mean_f.begin(), mean_f.end()), var(var_f.begin(), var_f.end());
    const float eps = 1e-5f;
    for (const bool affine : {true, false}) {
      const float* w = affine ? weight.data() : nullptr;
      const float* b = affine ? bias.data() : nullptr;
      std::vector<float> y(x.size());
      k::batch_norm_inference(x.data(), y.data(), d.n, d.c, d.s, mean_f.data(), var_f.data(), w, b, eps);
      check_close(y, normalize(x, d, mean, var, w, b, eps), 1e-6);
      auto in_place = x;
      k::batch_norm_inference(in_place.data(), in_place.data(), d.n, d.c, d.s, mean_f.data(), var_f.data(), w, b,
                              eps);
      CHECK(in_place == y);
      // With an activation: relu / relu6 of the same rounded values, in place too.
      for (const k::activation act : {k::activation::relu, k::activation::relu6}) {
        std::vector<float> expected = y;
        for (float& v : expected) v = v <= 0.0f ? 0.0f : act == k::activation::relu6 && v > 6.0f ? 6.0f : v;
        auto activated = x;
        k::batch_norm_inference(activated.data(), activated.data(), d.n, d.c, d.s, mean_f.data(), var_f.data(), w, b,
                                eps, act);
        CHECK(activated == expected);
      }
    }
  }
}

TEST_CASE("batch_norm_training: batch statistics, output and running statistics") {
  const dims shapes[] = {{2, 3, 7}, {4, 5, 1}, {3, 2, 17}, {2, 17, 33}, {1, 3, 1000}};
  unsigned seed = 31;
  for (const dims d : shapes) {
    CAPTURE(d.n);
    CAPTURE(d.c);
    CAPTURE(d.s);
    const auto x = random_values(d.n * d.c * d.s, seed++, -3.0f, 3.0f);
    const auto weight = random_values(d.c, seed++, 0.5f, 2.0f);
    const auto bias = random_values(d.c, seed++, -1.0f, 1.0f);
    const auto running_mean0 = random_values(d.c, seed++, -1.0f, 1.0f);
    const auto running_var0 = random_values(d.c, seed++, 0.5f, 2.0f);
    const float eps = 1e-5f, momentum = 0.1f;

    // Batch statistics per channel over N and S, two-pass in double.
    const double m = static_cast<double>(d.n * d.s);
    std::vector<double> mean(d.c, 0.0), var(d.c, 0.0);
    for (std::size_t ch = 0; ch < d.c; ++ch) {
      for (std::size_t i = 0; i < d.n; ++i)
        for (std::size_t j = 0; j < d.s; ++j) mean[ch] += x[(i * d.c + ch) * d.s + j];
      mean[ch] /= m;
      for (std::size_t i = 0; i < d.n; ++i)
        for (std::size_t j = 0; j < d.s; ++j) var[ch] += std::pow(x[(i * d.c + ch) * d.s + j] - mean[ch], 2);
      var[ch] /= m;
    }

    auto running_mean = running_mean0, running_var = running_var0;
    std::vector<float> y(x.size());
    k::batch_norm_training(x.data(), y.data(), d.n, d.c, d.s, weight.data(), bias.data(), running_mean.data(),
                           running_var.data(), momentum, eps);
    check_close(y, normalize(x, d, mean, var, weight.data(), bias.data(), eps), 1e-6);
    for (std::size_t ch = 0; ch < d.c; ++ch) {
      const double expect_mean = (1 - momentum) * running_mean0[ch] + momentum * mean[ch];
      const double expect_var = (1 - momentum) * running_var0[ch] + momentum * var[ch] * m / (m - 1);
      CHECK(std::abs(running_mean[ch] - expect_mean) <= 1e-6 * (1 + std::abs(expect_mean)));
      CHECK(std::abs(running_var[ch] - expect_var) <= 1e-6 * (1 + std::abs(expect_var)));
    }

    // Without running statistics or affine parameters, and in place.
    auto in_place = x;
    k::batch_norm_training(in_place.data(), in_place.data(), d.n, d.c, d.s, nullptr, nullptr, nullptr, nullptr,
                           momentum, eps);
    check_close(in_place, normalize(x, d, mean, var, nullptr, nullptr, eps), 1e-6);
  }
}

TEST_CASE("batch_norm_training: hand-checked running update") {
  // One channel, values 1, 2, 3, 4: mean 2.5, biased var 1.25, unbiased var 5/3.
  const std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> y(4);
  float running_mean = 0, running_var = 1;
  k::batch_norm_training(x.data(), y.data(), 2, 1, 2, nullptr, nullptr, &running_mean, &running_var, 0.1f, 0.0f);
  CHECK(running_mean == doctest::Approx(0.25).epsilon(1e-7));
  CHECK(running_var == doctest::Approx(0.9 + 0.1 * 5.0 / 3.0).epsilon(1e-7));
  CHECK(y[0] == doctest::Approx(-1.5 / std::sqrt(1.25)).epsilon(1e-6));
  CHECK(y[3] == doctest::Approx(1.5 / std::sqrt(1.25)).epsilon(1e-6));
}

TEST_CASE("batch_norm_training: variance of data far from zero") {
  // Mean 1e4, spread 1: E[x^2] - E[x]^2 in float would lose every digit of the variance.
  const dims d{4, 2, 257};
  auto x = random_values(d.n * d.c * d.s, 41, -1.0f, 1.0f);
  for (float& v : x) v += 1e4f;
  double mean = 0, var = 0;
  for (std::size_t i = 0; i < d.n; ++i)
    for (std::size_t j = 0; j < d.s; ++j) mean += x[i * d.c * d.s + j];  // channel 0
  mean /= static_cast<double>(d.n * d.s);
  for (std::size_t i = 0; i < d.n; ++i)
    for (std::size_t j = 0; j < d.s; ++j) var += std::pow(x[i * d.c * d.s + j] - mean, 2);
  var /= static_cast<double>(d.n * d.s - 1);
  std::vector<float> y(x.size()), running_mean(d.c, 0.0f), running_var(d.c, 0.0f);
  k::batch_norm_training(x.data(), y.data(), d.n, d.c, d.s, nullptr, nullptr, running_mean.data(), running_var.data(),
                         1.0f, 1e-5f);
  CHECK(running_var[0] == doctest::Approx(var).epsilon(1e-5));
  CHECK(running_mean[0] == doctest::Approx(mean).epsilon(1e-7));
}

TEST_CASE("batch_norm_training: one value per channel is an error, an empty batch a no-op") {
  std::vector<float> x = {1.0f, 2.0f}, y(2, -7.0f);
  CHECK_THROWS_WITH_AS(
      k::batch_norm_training(x.data(), y.data(), 1, 2, 1, nullptr, nullptr, nullptr, nullptr, 0.1f, 1e-5f),
      doctest::Contains("more than 1 value per channel"), tracemod::value_error);
  float running_mean = 3, running_var = 4;
  k::batch_norm_training(nullptr, nullptr, 0, 1, 5, nullptr, nullptr, &running_mean, &running_var, 0.1f, 1e-5f);
  CHECK(running_mean == 3);
  CHECK(running_var == 4);
  const float mean = 0, var = 1;
  CHECK_NOTHROW(k::batch_norm_inference(x.data(), y.data(), 0, 1, 2, &mean, &var, nullptr, nullptr, 1e-5f));
  CHECK_NOTHROW(k::batch_norm_inference(x.data(), y.data(), 1, 0, 2, nullptr, nullptr, nullptr, nullptr, 1e-5f));
  CHECK(y == std::vector<float>{-7.0f, -7.0f});  // no write
}

}  // namespace tmod_test_kernels_batch_norm
