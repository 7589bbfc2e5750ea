// batch_norm against the PyTorch goldens (inference and training, affine or not, with the running
// statistics updated in place) and a float64 scalar loop on other ranks and argument combinations.
#include "functional/golden_case.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/normalization.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace tmod_test_functional_normalization {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

// Batch statistics sum a few hundred float32 values; outputs and statistics are O(1).
constexpr double rtol = 1e-5, atol = 1e-5;

TEST_CASE("functional: batch_norm matches the goldens, running statistics included") {
  const std::size_t count = golden_case::for_each_case("batch_norm", [](const std::string& name, auto& args) {
    const F::batch_norm_fn::params p{.training = args.flag("training", false),
                                     .momentum = args.real("momentum", 0.1),
                                     .eps = args.real("eps", 1e-5)};
    auto in = golden_case::inputs(name, 3, 5);
    REQUIRE_MESSAGE(in.size() != 4, name << ": weight without bias");
    const Tensor mean_before = in[1].clone(), var_before = in[2].clone();
    const Tensor y = in.size() == 5 ? F::batch_norm(in[0], in[1], in[2], in[3], in[4], p)
                                    : F::batch_norm(in[0], in[1], in[2], tmod::none, tmod::none, p);
    golden::check_close(y, golden::load(name, "out"), rtol, atol, name);
    if (p.training) {
      golden::check_close(in[1], golden::load(name, "running_mean"), rtol, atol, name + " running_mean");
      golden::check_close(in[2], golden::load(name, "running_var"), rtol, atol, name + " running_var");
      // The output of training mode does not depend on the running statistics.
      const Tensor y2 = in.size() == 5 ? F::batch_norm(in[0], tmod::none, tmod::none, in[3], in[4], p)
                                       : F::batch_norm(in[0], tmod::none, tmod::none, tmod::none, tmod::none, p);
      golden::check_close(y2, golden::load(name, "out"), rtol, atol, name + " without running statistics");
    } else {
      CHECK_FALSE_MESSAGE(golden::has(name, "running_mean"), name << ": inference golden with updated statistics");
      golden::check_close(in[1], mean_before, 0, 0, name + " running_mean untouched");
      golden::check_close(in[2], var_before, 0, 0, name + " running_var untouched");
    }
  });
  CHECK(count >= 10);
}

struct reference_bn {
  Tensor y, mean, var;
};

// Per channel: statistics over N and the trailing axes (biased variance for the output, unbiased
// for the running update), all in float64.
reference_bn reference_batch_norm(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor* w,
                                  const Tensor* b, const F::batch_norm_fn::params& p) {
  const std::int64_t n = x.size(0), c = x.size(1), s = x.numel() / (n * c);
  reference_bn r{tmod::Tensor::empty(x.shape()), mean.clone(), var.clone()};
  for (std::int64_t ch = 0; ch < c; ++ch) {
    double mu = mean.data<float>()[ch], sigma2 = var.data<float>()[ch];
    if (p.training) {
      double sum = 0, sq = 0;
      const double m = static_cast<double>(n * s);
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < s; ++j) sum += x.data<float>()[(i * c + ch) * s + j];
      mu = sum / m;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < s; ++j) sq += std::pow(x.data<float>()[(i * c + ch) * s + j] - mu, 2);
      sigma2 = sq / m;
      r.mean.data<float>()[ch] = static_cast<float>((1 - p.momentum) * mean.data<float>()[ch] + p.momentum * mu);
      r.var.data<float>()[ch] =
          static_cast<float>((1 - p.momentum) * var.data<float>()[ch] + p.momentum * sq / (m - 1));
    }
    const double scale = (w ? w->data<float>()[ch] : 1.0) / std::sqrt(sigma2 + p.eps);
    const double shift = b ? b->data<float>()[ch] : 0.0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < s; ++j) {
        const std::int64_t at = (i * c + ch) * s + j;
        r.y.data<float>()[at] = static_cast<float>((x.data<float>()[at] - mu) * scale + shift);
      }
  }
  return r;
}

TEST_CASE("functional: batch_norm on rank 2, 3 and 5 inputs and partial affine, against a scalar loop") {
  std::uint64_t seed = 50;
  for (const Shape& s : {Shape{9, 5}, Shape{3, 7, 11}, Shape{2, 3, 2, 3, 5}, Shape{1, 17, 4, 4}}) {
    for (bool training : {false, true}) {
      CAPTURE(s.to_string());
      CAPTURE(training);
      const std::int64_t c = s[1];
      const Tensor x = tmod::randn(s, seed++);
      const Tensor mean = tmod::randn({c}, seed++), w = tmod::randn({c}, seed++), b = tmod::randn({c}, seed++);
      Tensor var = tmod::randn({c}, seed++);
      for (float& v : var.values<float>()) v = 0.5f + std::abs(v);
      const F::batch_norm_fn::params p{.training = training, .momentum = 0.25, .eps = 1e-3};

      Tensor m1 = mean.clone(), v1 = var.clone();
      const reference_bn r1 = reference_batch_norm(x, mean, var, &w, nullptr, p);
      golden::check_close(F::batch_norm(x, m1, v1, w, tmod::none, p), r1.y, rtol, atol, "weight only");
      golden::check_close(m1, r1.mean, rtol, atol, "weight only: running_mean");
      golden::check_close(v1, r1.var, rtol, atol, "weight only: running_var");

      Tensor m2 = mean.clone(), v2 = var.clone();
      const reference_bn r2 = reference_batch_norm(x, mean, var, nullptr, &b, p);
      golden::check_close(F::batch_norm(x, m2, v2, tmod::none, b, p), r2.y, rtol, atol, "bias only");
      golden::check_close(m2, r2.mean, rtol, atol, "bias only: running_mean");
      golden::check_close(v2, r2.var, rtol, atol, "bias only: running_var");
    }
  }
}

TEST_CASE("functional: batch_norm defaults: inference, momentum 0.1, eps 1e-5") {
  const F::batch_norm_fn::params defaults{};
  CHECK_FALSE(defaults.training);
  CHECK(defaults.momentum == 0.1);
  CHECK(defaults.eps == 1e-5);
  const Tensor x = tmod::randn({4, 3, 2, 2}, 1), mean = tmod::randn({3}, 2), var = tmod::ones({3});
  const reference_bn r = reference_batch_norm(x, mean, var, nullptr, nullptr, defaults);
  golden::check_close(F::batch_norm(x, mean, var), r.y, rtol, atol, "all defaults");

  // Training updates the running statistics through every tensor sharing their buffers (the
  // module's buffers), with the default momentum.
  Tensor m = mean.clone(), v = var.clone();
  const Tensor module_mean = m, module_var = v;
  const reference_bn rt = reference_batch_norm(x, mean, var, nullptr, nullptr, {.training = true});
  golden::check_close(F::batch_norm(x, m, v, tmod::none, tmod::none, {.training = true}), rt.y, rtol, atol);
  golden::check_close(module_mean, rt.mean, rtol, atol, "shared running_mean");
  golden::check_close(module_var, rt.var, rtol, atol, "shared running_var");
}

TEST_CASE("functional: batch_norm keeps empty inputs empty") {
  const Tensor mean = tmod::zeros({3}), var = tmod::ones({3});
  const Tensor y = F::batch_norm(tmod::zeros({0, 3, 4, 4}), mean, var);
  CHECK(y.shape() == Shape{0, 3, 4, 4});
  Tensor m = mean.clone(), v = var.clone();
  const Tensor yt = F::batch_norm(tmod::zeros({2, 3, 0}), m, v, tmod::none, tmod::none, {.training = true});
  CHECK(yt.shape() == Shape{2, 3, 0});
  golden::check_close(m, mean, 0, 0, "empty batch leaves running_mean");
  golden::check_close(v, var, 0, 0, "empty batch leaves running_var");
}

}  // namespace

}  // namespace tmod_test_functional_normalization
