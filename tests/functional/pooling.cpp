// max_pool2d, avg_pool2d and adaptive_avg_pool2d against the PyTorch goldens and scalar loops
// written from PyTorch's definitions (ceil mode, padding, dilation, count_include_pad).
#include "functional/golden_case.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/pooling.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace tmod_test_functional_pooling {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

// A max is exact; an average of a few dozen O(1) floats is within a few ulps of the float64 one.
constexpr double exact = 0.0;
constexpr double avg_rtol = 1e-6, avg_atol = 2e-6;

TEST_CASE("functional: max_pool2d matches the goldens") {
  const std::size_t count = golden_case::for_each_case("max_pool2d", [](const std::string& name, auto& args) {
    const F::pair2 kernel = args.required_pair("kernel_size");
    const F::max_pool2d_fn::params p{.stride = args.optional_pair("stride"),
                                     .padding = args.pair("padding", 0),
                                     .dilation = args.pair("dilation", 1),
                                     .ceil_mode = args.flag("ceil_mode", false)};
    const auto in = golden_case::inputs(name, 1, 1);
    golden::check_close(F::max_pool2d(in[0], kernel, p), golden::load(name, "out"), exact, exact, name);
  });
  CHECK(count >= 12);
}

TEST_CASE("functional: avg_pool2d matches the goldens") {
  const std::size_t count = golden_case::for_each_case("avg_pool2d", [](const std::string& name, auto& args) {
    const F::pair2 kernel = args.required_pair("kernel_size");
    const F::avg_pool2d_fn::params p{.stride = args.optional_pair("stride"),
                                     .padding = args.pair("padding", 0),
                                     .ceil_mode = args.flag("ceil_mode", false),
                                     .count_include_pad = args.flag("count_include_pad", true)};
    const auto in = golden_case::inputs(name, 1, 1);
    golden::check_close(F::avg_pool2d(in[0], kernel, p), golden::load(name, "out"), avg_rtol, avg_atol, name);
  });
  CHECK(count >= 9);
}

TEST_CASE("functional: adaptive_avg_pool2d matches the goldens") {
  const std::size_t count =
      golden_case::for_each_case("adaptive_avg_pool2d", [](const std::string& name, auto& args) {
        // The generator writes PyTorch's name for the argument MegEngine calls oshp.
        const std::optional<F::pair2> output_size = args.optional_pair("output_size");
        const std::optional<F::pair2> oshp = args.optional_pair("oshp");
        REQUIRE_MESSAGE(output_size.has_value() != oshp.has_value(),
                        name << ": needs exactly one of output_size, oshp");
        const auto in = golden_case::inputs(name, 1, 1);
        const Tensor y = F::adaptive_avg_pool2d(in[0], output_size ? *output_size : *oshp);
        golden::check_close(y, golden::load(name, "out"), avg_rtol, avg_atol, name);
      });
  CHECK(count >= 7);
}

// PyTorch's output extent of one pooled axis.
std::int64_t pooled_extent(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d, bool ceil) {
  const std::int64_t span = in + 2 * p - d * (k - 1) - 1;
  std::int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + p) --out;  // the last window must start inside the input or left padding
  return out;
}

struct pool_case {
  Shape x;
  F::pair2 kernel;
  std::optional<F::pair2> stride;
  F::pair2 padding{0}, dilation{1};
  bool ceil_mode = false;
};

Tensor reference_pool(const Tensor& x, const pool_case& c, bool max, bool count_include_pad) {
  const std::int64_t n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
  const F::pair2 st = c.stride.value_or(c.kernel);
  const std::int64_t oh = pooled_extent(h, c.kernel.h, st.h, c.padding.h, c.dilation.h, c.ceil_mode);
  const std::int64_t ow = pooled_extent(w, c.kernel.w, st.w, c.padding.w, c.dilation.w, c.ceil_mode);
  Tensor y = tmod::Tensor::empty({n, ch, oh, ow});
  float* out = y.data<float>();
  for (std::int64_t plane = 0; plane < n * ch; ++plane)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j) {
        const std::int64_t h0 = i * st.h - c.padding.h, w0 = j * st.w - c.padding.w;
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        std::int64_t valid = 0;
        for (std::int64_t u = 0; u < c.kernel.h; ++u)
          for (std::int64_t v = 0; v < c.kernel.w; ++v) {
            const std::int64_t yy = h0 + u * c.dilation.h, xx = w0 + v * c.dilation.w;
            if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
            const double value = x.data<float>()[(plane * h + yy) * w + xx];
            acc = max ? std::max(acc, value) : acc + value;
            ++valid;
          }
        if (!max) {
          // Included padding counts the window clipped to the padded input, not beyond it.
          const std::int64_t span_h = std::min(h0 + c.kernel.h, h + c.padding.h) - h0;
          const std::int64_t span_w = std::min(w0 + c.kernel.w, w + c.padding.w) - w0;
          const std::int64_t divisor = count_include_pad ? span_h * span_w : valid;
          acc = divisor == 0 ? 0.0 : acc / static_cast<double>(divisor);
        }
        *out++ = static_cast<float>(acc);
      }
  return y;
}

const pool_case pool_cases[] = {
    {{1, 1, 1, 1}, 1, {}},
    {{2, 3, 7, 7}, 7, {}},                         // global pooling
    {{1, 2, 17, 19}, 3, 2, 1, 1, true},            // odd sizes, ceil mode
    {{1, 2, 5, 5}, 2, 2, 1, 1, true},              // ceil mode whose last window would start in the padding
    {{1, 3, 9, 11}, {2, 3}, {{3, 1}}, {1, 1}, 1, false},
    {{1, 1, 5, 33}, {1, 5}, {{1, 4}}, {0, 2}, 1, true},
    {{2, 5, 8, 8}, 2, {{1, 1}}, 1, 1, false},     // overlapping windows
};

TEST_CASE("functional: max_pool2d and avg_pool2d against a scalar loop") {
  std::uint64_t seed = 300;
  for (const pool_case& c : pool_cases) {
    CAPTURE(c.x.to_string());
    CAPTURE(F::repr(c.kernel));
    CAPTURE(c.ceil_mode);
    const Tensor x = tmod::randn(c.x, seed++);
    const Tensor mx = F::max_pool2d(x, c.kernel, {.stride = c.stride, .padding = c.padding, .ceil_mode = c.ceil_mode});
    golden::check_close(mx, reference_pool(x, c, true, true), exact, exact, "max");
    for (bool include : {true, false}) {
      const Tensor av = F::avg_pool2d(x, c.kernel,
                                      {.stride = c.stride,
                                       .padding = c.padding,
                                       .ceil_mode = c.ceil_mode,
                                       .count_include_pad = include});
      golden::check_close(av, reference_pool(x, c, false, include), avg_rtol, avg_atol,
                          include ? "avg incl" : "avg excl");
    }
  }
  // dilation (max only)
  const pool_case dilated{{1, 2, 13, 12}, 3, 2, 1, {2, 3}, true};
  const Tensor x = tmod::randn(dilated.x, 9);
  golden::check_close(F::max_pool2d(x, 3, {.stride = 2, .padding = 1, .dilation = {2, 3}, .ceil_mode = true}),
                      reference_pool(x, dilated, true, true), exact, exact, "dilated max");
}

TEST_CASE("functional: pooling defaults: stride is the kernel size, no padding, floor mode") {
  const Tensor x = tmod::randn({1, 2, 9, 9}, 4);
  CHECK(F::max_pool2d(x, 2).shape() == Shape{1, 2, 4, 4});
  CHECK(F::avg_pool2d(x, 3).shape() == Shape{1, 2, 3, 3});
  golden::check_close(F::max_pool2d(x, 2), F::max_pool2d(x, 2, {.stride = 2}), 0, 0);
  golden::check_close(F::avg_pool2d(x, {2, 3}), F::avg_pool2d(x, {2, 3}, {.stride = F::pair2{2, 3}}), 0, 0);
  // padding only ever counts as -inf for max: an all-negative input keeps negative maxima
  const Tensor neg = tmod::full({1, 1, 3, 3}, -5.0);
  const Tensor y = F::max_pool2d(neg, 3, {.stride = 1, .padding = 1});
  for (float v : y.values<float>()) CHECK(v == -5.f);
}

Tensor reference_adaptive(const Tensor& x, std::int64_t oh, std::int64_t ow) {
  const std::int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
  Tensor y = tmod::Tensor::empty({x.size(0), x.size(1), oh, ow});
  float* out = y.data<float>();
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j) {
        const std::int64_t h0 = i * h / oh, h1 = ((i + 1) * h + oh - 1) / oh;
        const std::int64_t w0 = j * w / ow, w1 = ((j + 1) * w + ow - 1) / ow;
        double sum = 0;
        for (std::int64_t u = h0; u < h1; ++u)
          for (std::int64_t v = w0; v < w1; ++v) sum += x.data<float>()[(p * h + u) * w + v];
        *out++ = static_cast<float>(sum / static_cast<double>((h1 - h0) * (w1 - w0)));
      }
  return y;
}

TEST_CASE("functional: adaptive_avg_pool2d against a scalar loop") {
  const struct {
    Shape x;
    F::pair2 oshp;
  } cases[] = {{{1, 3, 7, 7}, 1},  {{2, 2, 11, 5}, {3, 4}}, {{1, 1, 3, 17}, {5, 2}},
               {{1, 33, 9, 9}, 9}, {{0, 3, 4, 4}, 2}};
  std::uint64_t seed = 70;
  for (const auto& c : cases) {
    CAPTURE(c.x.to_string());
    const Tensor x = tmod::randn(c.x, seed++);
    golden::check_close(F::adaptive_avg_pool2d(x, c.oshp), reference_adaptive(x, c.oshp.h, c.oshp.w), avg_rtol,
                        avg_atol);
  }
}

}  // namespace

}  // namespace tmod_test_functional_pooling
