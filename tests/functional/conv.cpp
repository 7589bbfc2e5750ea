// conv2d against the PyTorch goldens (stride, padding, dilation, groups, depthwise, no bias, empty
// batch) and a float64 scalar loop on odd geometries.
#include "functional/golden_case.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/conv.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

namespace tmod_test_functional_conv {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

// Each output is a dot product of length in_channels/groups * kH * kW (see linalg.cpp).
constexpr double rtol = 1e-5;
double atol_for(std::int64_t k) { return 1e-6 + 2e-7 * static_cast<double>(k); }

TEST_CASE("functional: conv2d matches the goldens") {
  const std::size_t count = golden_case::for_each_case("conv2d", [](const std::string& name, auto& args) {
    const F::conv2d_fn::params p{.stride = args.pair("stride", 1),
                                 .padding = args.pair("padding", 0),
                                 .dilation = args.pair("dilation", 1),
                                 .groups = args.integer("groups", 1)};
    const auto in = golden_case::inputs(name, 2, 3);
    const Tensor y = in.size() == 3 ? F::conv2d(in[0], in[1], in[2], p) : F::conv2d(in[0], in[1], p);
    const Shape& w = in[1].shape();
    golden::check_close(y, golden::load(name, "out"), rtol, atol_for(w[1] * w[2] * w[3]), name);
    if (in.size() == 2) golden::check_close(F::conv2d(in[0], in[1], tmod::none, p), y, 0, 0, name + " (none bias)");
  });
  CHECK(count >= 19);
}

// y[n, k, oh, ow] = bias[k] + sum over the group's channels and the kernel taps, in float64.
Tensor reference_conv2d(const Tensor& x, const Tensor& w, const Tensor* b, const F::conv2d_fn::params& p) {
  const std::int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const std::int64_t k = w.size(0), cg = w.size(1), r = w.size(2), s = w.size(3);
  const std::int64_t kg = k / p.groups;
  const std::int64_t oh = (h + 2 * p.padding.h - p.dilation.h * (r - 1) - 1) / p.stride.h + 1;
  const std::int64_t ow = (wd + 2 * p.padding.w - p.dilation.w * (s - 1) - 1) / p.stride.w + 1;
  REQUIRE(c == cg * p.groups);
  Tensor y = tmod::Tensor::empty({n, k, oh, ow});
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t ok = 0; ok < k; ++ok)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          double sum = b ? b->data<float>()[ok] : 0.0;
          const std::int64_t g = ok / kg;
          for (std::int64_t ic = 0; ic < cg; ++ic)
            for (std::int64_t u = 0; u < r; ++u)
              for (std::int64_t v = 0; v < s; ++v) {
                const std::int64_t yy = i * p.stride.h - p.padding.h + u * p.dilation.h;
                const std::int64_t xx = j * p.stride.w - p.padding.w + v * p.dilation.w;
                if (yy < 0 || yy >= h || xx < 0 || xx >= wd) continue;
                sum += static_cast<double>(x.at({in, g * cg + ic, yy, xx})) * w.at({ok, ic, u, v});
              }
          y.data<float>()[((in * k + ok) * oh + i) * ow + j] = static_cast<float>(sum);
        }
  return y;
}

TEST_CASE("functional: conv2d on odd geometries, against a scalar loop") {
  struct geometry {
    Shape x, w;
    F::conv2d_fn::params p;
  };
  const geometry cases[] = {
      {{1, 1, 1, 1}, {1, 1, 1, 1}, {}},
      {{1, 3, 5, 5}, {2, 3, 5, 5}, {}},  // kernel as large as the input: 1x1 output
      {{3, 5, 11, 7}, {17, 5, 3, 3}, {.stride = {2, 1}, .padding = {1, 0}}},
      {{1, 6, 9, 10}, {9, 2, 2, 3}, {.stride = 3, .padding = {1, 2}, .dilation = {2, 1}, .groups = 3}},
      {{2, 16, 6, 6}, {16, 1, 3, 3}, {.stride = 1, .padding = 1, .groups = 16}},  // depthwise
      {{1, 4, 8, 8}, {12, 1, 3, 3}, {.padding = 1, .groups = 4}},                 // depthwise, multiplier 3
      {{1, 33, 4, 4}, {31, 33, 1, 1}, {}},                                        // pointwise, odd channels
      {{1, 2, 7, 7}, {3, 2, 3, 3}, {.padding = 4}},                               // padding wider than the kernel
  };
  std::uint64_t seed = 100;
  for (const geometry& c : cases) {
    CAPTURE(c.x.to_string());
    CAPTURE(c.w.to_string());
    const Tensor x = tmod::randn(c.x, seed++), w = tmod::randn(c.w, seed++), b = tmod::randn({c.w[0]}, seed++);
    const double atol = atol_for(c.w[1] * c.w[2] * c.w[3]);
    golden::check_close(F::conv2d(x, w, b, c.p), reference_conv2d(x, w, &b, c.p), rtol, atol);
    golden::check_close(F::conv2d(x, w, c.p), reference_conv2d(x, w, nullptr, c.p), rtol, atol);
  }
}

TEST_CASE("functional: conv2d params: an integer means both axes; defaults are PyTorch's") {
  const Tensor x = tmod::randn({1, 2, 9, 9}, 1), w = tmod::randn({3, 2, 3, 3}, 2);
  const F::conv2d_fn::params p{.stride = 2, .padding = 1};
  CHECK(p.stride == F::pair2{2, 2});
  CHECK(p.padding == F::pair2{1, 1});
  CHECK(p.dilation == F::pair2{1, 1});
  CHECK(p.groups == 1);
  CHECK(F::conv2d(x, w, p).shape() == Shape{1, 3, 5, 5});
  CHECK(F::conv2d(x, w).shape() == Shape{1, 3, 7, 7});
  golden::check_close(F::conv2d(x, w, p), F::conv2d(x, w, {.stride = {2, 2}, .padding = {1, 1}}), 0, 0);
}

}  // namespace

}  // namespace tmod_test_functional_conv
