#include <tracemod/kernels/pooling.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace tmod_test_kernels_pooling {

namespace {

namespace k = tracemod::kernels;
using k::pool2d_geometry;
using i64 = std::int64_t;

std::vector<float> random_values(i64 count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& x : v) x = dist(gen);
  return v;
}

// Output extent as PyTorch's MaxPool2d/AvgPool2d documentation states it: floor (or ceil in
// ceil_mode) of (in + 2 pad - dilation (kernel - 1) - 1) / stride + 1, dropping a last window
// that would start in the right padding.
i64 doc_out(i64 in, i64 kernel, i64 stride, i64 pad, i64 dilation, bool ceil_mode) {
  const double q = static_cast<double>(in + 2 * pad - dilation * (kernel - 1) - 1) / static_cast<double>(stride);
  auto out = static_cast<i64>(ceil_mode ? std::ceil(q) : std::floor(q)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Max over the window positions stride * o + dilation * t - pad that fall inside the input;
// NaN wins as in torch.max.
std::vector<float> reference_max(const pool2d_geometry& g, const std::vector<float>& x) {
  const i64 oh_n = doc_out(g.h, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h, g.ceil_mode);
  const i64 ow_n = doc_out(g.w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w, g.ceil_mode);
  std::vector<float> y(static_cast<std::size_t>(g.n * g.c * oh_n * ow_n));
  for (i64 p = 0; p < g.n * g.c; ++p)
    for (i64 oh = 0; oh < oh_n; ++oh)
      for (i64 ow = 0; ow < ow_n; ++ow) {
        float m = -std::numeric_limits<float>::infinity();
        for (i64 a = 0; a < g.kernel_h; ++a)
          for (i64 b = 0; b < g.kernel_w; ++b) {
            const i64 ih = g.stride_h * oh + g.dilation_h * a - g.pad_h;
            const i64 iw = g.stride_w * ow + g.dilation_w * b - g.pad_w;
            if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
            const float v = x[static_cast<std::size_t>((p * g.h + ih) * g.w + iw)];
            if (std::isnan(v) || v > m) m = std::isnan(m) ? m : v;
          }
        y[static_cast<std::size_t>((p * oh_n + oh) * ow_n + ow)] = m;
      }
  return y;
}

// Mean over the window: the sum of the positions inside the input, divided by divisor_override,
// or by the number of window positions inside the padded input (count_include_pad) or inside
// the input; a window holding no input position gives 0.
std::vector<float> reference_avg(const pool2d_geometry& g, const std::vector<float>& x) {
  const i64 oh_n = doc_out(g.h, g.kernel_h, g.stride_h, g.pad_h, 1, g.ceil_mode);
  const i64 ow_n = doc_out(g.w, g.kernel_w, g.stride_w, g.pad_w, 1, g.ceil_mode);
  std::vector<float> y(static_cast<std::size_t>(g.n * g.c * oh_n * ow_n));
  for (i64 p = 0; p < g.n * g.c; ++p)
    for (i64 oh = 0; oh < oh_n; ++oh)
      for (i64 ow = 0; ow < ow_n; ++ow) {
        double sum = 0;
        i64 inside = 0, padded = 0;
        for (i64 a = 0; a < g.kernel_h; ++a)
          for (i64 b = 0; b < g.kernel_w; ++b) {
            const i64 ih = g.stride_h * oh + a - g.pad_h;
            const i64 iw = g.stride_w * ow + b - g.pad_w;
            if (ih >= -g.pad_h && ih < g.h + g.pad_h && iw >= -g.pad_w && iw < g.w + g.pad_w) ++padded;
            if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
            ++inside;
            sum += x[static_cast<std::size_t>((p * g.h + ih) * g.w + iw)];
          }
        const i64 divisor = g.divisor_override ? g.divisor_override : g.count_include_pad ? padded : inside;
        y[static_cast<std::size_t>((p * oh_n + oh) * ow_n + ow)] =
            inside == 0 ? 0.0f : static_cast<float>(sum / static_cast<double>(divisor));
      }
  return y;
}

void check_close(const std::vector<float>& y, const std::vector<float>& ref) {
  REQUIRE(y.size() == ref.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (std::isnan(ref[i]) || std::isinf(ref[i])) {
      CHECK((std::isnan(y[i]) ? std::isnan(ref[i]) : y[i] == ref[i]));
      continue;
    }
    CHECK(std::abs(y[i] - ref[i]) <= 1e-6f * (1.0f + std::abs(ref[i])));
  }
}

void check_max(const pool2d_geometry& g, unsigned seed) {
  CAPTURE(g.n);
  CAPTURE(g.c);
  CAPTURE(g.h);
  CAPTURE(g.w);
  CAPTURE(g.kernel_h);
  CAPTURE(g.kernel_w);
  CAPTURE(g.stride_h);
  CAPTURE(g.stride_w);
  CAPTURE(g.pad_h);
  CAPTURE(g.pad_w);
  CAPTURE(g.dilation_h);
  CAPTURE(g.dilation_w);
  CAPTURE(g.ceil_mode);
  REQUIRE(g.out_h() == doc_out(g.h, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h, g.ceil_mode));
  REQUIRE(g.out_w() == doc_out(g.w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w, g.ceil_mode));
  const auto x = random_values(g.n * g.c * g.h * g.w, seed);
  std::vector<float> y(static_cast<std::size_t>(g.n * g.c * g.out_h() * g.out_w()), 1234.0f);
  k::max_pool2d(g, x.data(), y.data());
  check_close(y, reference_max(g, x));
}

void check_avg(const pool2d_geometry& g, unsigned seed) {
  CAPTURE(g.n);
  CAPTURE(g.c);
  CAPTURE(g.h);
  CAPTURE(g.w);
  CAPTURE(g.kernel_h);
  CAPTURE(g.kernel_w);
  CAPTURE(g.stride_h);
  CAPTURE(g.stride_w);
  CAPTURE(g.pad_h);
  CAPTURE(g.pad_w);
  CAPTURE(g.ceil_mode);
  CAPTURE(g.count_include_pad);
  CAPTURE(g.divisor_override);
  const auto x = random_values(g.n * g.c * g.h * g.w, seed);
  std::vector<float> y(static_cast<std::size_t>(g.n * g.c * g.out_h() * g.out_w()), 1234.0f);
  k::avg_pool2d(g, x.data(), y.data());
  check_close(y, reference_avg(g, x));
}

pool2d_geometry geometry(i64 n, i64 c, i64 h, i64 w, i64 kh, i64 kw, i64 sh, i64 sw, i64 ph, i64 pw) {
  return {.n = n, .c = c, .h = h, .w = w, .kernel_h = kh, .kernel_w = kw, .stride_h = sh, .stride_w = sw,
          .pad_h = ph, .pad_w = pw};
}

const pool2d_geometry shapes[] = {
    geometry(1, 3, 112, 112, 3, 3, 2, 2, 1, 1),  // the ResNet stem pooling
    geometry(2, 3, 7, 13, 3, 3, 2, 2, 1, 1),     //
    geometry(1, 2, 13, 17, 2, 2, 2, 2, 0, 0),    //
    geometry(2, 2, 17, 7, 3, 3, 1, 1, 1, 1),     //
    geometry(1, 2, 9, 70, 2, 3, 1, 2, 1, 1),     // wide rows: several SIMD batches per row
    geometry(2, 1, 11, 67, 5, 5, 3, 3, 2, 2),    // stride 3
    geometry(1, 2, 8, 40, 1, 1, 1, 1, 0, 0),     // 1x1 window
    geometry(3, 2, 5, 5, 2, 2, 2, 2, 1, 1),      // ceil_mode drops a window starting in the padding
    geometry(1, 1, 6, 33, 4, 4, 3, 3, 2, 2),     //
    geometry(1, 2, 31, 31, 3, 2, 4, 1, 0, 1),    //
};

}  // namespace

TEST_CASE("pooling: output extents follow PyTorch's formula") {
  CHECK(geometry(1, 64, 112, 112, 3, 3, 2, 2, 1, 1).out_h() == 56);
  auto g = geometry(1, 1, 5, 6, 2, 3, 2, 2, 0, 1);
  CHECK(g.out_h() == 2);  // floor(3 / 2) + 1
  CHECK(g.out_w() == 3);  // floor(5 / 2) + 1
  g.ceil_mode = true;
  CHECK(g.out_h() == 3);  // ceil(3 / 2) + 1
  CHECK(g.out_w() == 4);  // ceil(5 / 2) + 1; the last window starts at 5, inside the input
  auto h = geometry(1, 1, 5, 5, 2, 2, 2, 2, 1, 1);
  h.ceil_mode = true;
  CHECK(h.out_h() == 3);  // ceil(5 / 2) + 1 = 4, but window 3 would start at 5, in the right padding
  h.dilation_h = 2;
  CHECK(h.out_h() == 3);  // ceil(4 / 2) + 1 = 3; window 2 starts at 2 * 2 - 1 = 3, inside the input
}

TEST_CASE("max_pool2d: matches the definition for many geometries") {
  unsigned seed = 51;
  for (pool2d_geometry g : shapes)
    for (const bool ceil_mode : {false, true}) {
      g.ceil_mode = ceil_mode;
      check_max(g, seed++);
    }
  auto dilated = geometry(2, 2, 15, 37, 3, 2, 2, 1, 1, 1);
  dilated.dilation_h = 2;
  dilated.dilation_w = 3;
  for (const bool ceil_mode : {false, true}) {
    dilated.ceil_mode = ceil_mode;
    check_max(dilated, seed++);
  }
}

TEST_CASE("pooling: every row width from 1 to 80 (SIMD body, border and tail splits)") {
  unsigned seed = 61;
  for (i64 w = 1; w <= 80; ++w)
    for (const i64 stride : {i64{1}, i64{2}, i64{3}})
      for (const i64 kernel_h : {i64{1}, i64{3}}) {
        // kernel_h 1 pools straight from the input rows, so an over-read would leave the buffer.
        auto g = geometry(1, 1, 4, w, kernel_h, std::min<i64>(3, w + 2), 2, stride, kernel_h / 2, 1);
        for (const bool ceil_mode : {false, true}) {
          g.ceil_mode = ceil_mode;
          check_max(g, seed);
          check_avg(g, seed++);
        }
      }
}

TEST_CASE("max_pool2d: a dilated window can miss the input entirely") {
  // Taps at -1 and 2 of an input of height 2: PyTorch leaves such a window at -inf.
  auto g = geometry(1, 1, 2, 20, 2, 1, 1, 1, 1, 0);
  g.dilation_h = 3;
  REQUIRE(g.out_h() == 1);
  const auto x = random_values(40, 3);
  std::vector<float> y(20);
  k::max_pool2d(g, x.data(), y.data());
  for (float v : y) CHECK(v == -std::numeric_limits<float>::infinity());
}

TEST_CASE("max_pool2d: NaN propagates from anywhere in the window") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto g = geometry(1, 1, 9, 70, 3, 3, 2, 2, 1, 1);
  for (const i64 pos : {i64{0}, i64{2 * 70 + 33}, i64{4 * 70 + 69}}) {
    auto x = random_values(9 * 70, 9);
    x[static_cast<std::size_t>(pos)] = nan;
    std::vector<float> y(static_cast<std::size_t>(g.out_h() * g.out_w()));
    k::max_pool2d(g, x.data(), y.data());
    check_close(y, reference_max(g, x));
  }
}

TEST_CASE("avg_pool2d: divisor rules, ceil_mode and padding") {
  unsigned seed = 71;
  for (pool2d_geometry g : shapes)
    for (const bool ceil_mode : {false, true})
      for (const bool include_pad : {false, true}) {
        g.ceil_mode = ceil_mode;
        g.count_include_pad = include_pad;
        check_avg(g, seed++);
      }
  auto g = geometry(2, 2, 7, 13, 3, 3, 2, 2, 1, 1);
  g.divisor_override = 4;
  check_avg(g, seed++);
}

TEST_CASE("avg_pool2d: hand-checked corner divisors") {
  // 1..9 in a 3x3 plane, 2x2 windows, stride 2, padding 1: the corner window holds only x[0][0].
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto g = geometry(1, 1, 3, 3, 2, 2, 2, 2, 1, 1);
  std::vector<float> y(4);
  k::avg_pool2d(g, x.data(), y.data());
  CHECK(y == std::vector<float>{1.0f / 4, (2 + 3) / 4.0f, (4 + 7) / 4.0f, (5 + 6 + 8 + 9) / 4.0f});
  g.count_include_pad = false;
  k::avg_pool2d(g, x.data(), y.data());
  CHECK(y == std::vector<float>{1.0f, (2 + 3) / 2.0f, (4 + 7) / 2.0f, (5 + 6 + 8 + 9) / 4.0f});
}

TEST_CASE("adaptive_avg_pool2d: PyTorch's bins") {
  struct dims {
    i64 n, c, h, w, oh, ow;
  };
  unsigned seed = 91;
  for (const dims d : {dims{1, 512, 7, 7, 1, 1}, dims{2, 3, 13, 17, 5, 7}, dims{1, 2, 7, 7, 7, 7},
                       dims{1, 1, 10, 10, 3, 4}, dims{2, 2, 5, 5, 7, 8}, dims{1, 3, 9, 40, 2, 1},
                       dims{1, 1, 3, 50, 1, 3}}) {
    CAPTURE(d.h);
    CAPTURE(d.w);
    CAPTURE(d.oh);
    CAPTURE(d.ow);
    const auto x = random_values(d.n * d.c * d.h * d.w, seed++);
    std::vector<float> y(static_cast<std::size_t>(d.n * d.c * d.oh * d.ow));
    k::adaptive_avg_pool2d(x.data(), y.data(), d.n, d.c, d.h, d.w, d.oh, d.ow);
    std::vector<float> ref(y.size());
    for (i64 p = 0; p < d.n * d.c; ++p)
      for (i64 i = 0; i < d.oh; ++i)
        for (i64 j = 0; j < d.ow; ++j) {
          const auto h0 = static_cast<i64>(std::floor(static_cast<double>(i * d.h) / static_cast<double>(d.oh)));
          const auto h1 = static_cast<i64>(std::ceil(static_cast<double>((i + 1) * d.h) / static_cast<double>(d.oh)));
          const auto w0 = static_cast<i64>(std::floor(static_cast<double>(j * d.w) / static_cast<double>(d.ow)));
          const auto w1 = static_cast<i64>(std::ceil(static_cast<double>((j + 1) * d.w) / static_cast<double>(d.ow)));
          double sum = 0;
          for (i64 a = h0; a < h1; ++a)
            for (i64 b = w0; b < w1; ++b) sum += x[static_cast<std::size_t>((p * d.h + a) * d.w + b)];
          ref[static_cast<std::size_t>((p * d.oh + i) * d.ow + j)] =
              static_cast<float>(sum / static_cast<double>((h1 - h0) * (w1 - w0)));
        }
    check_close(y, ref);
  }
}

TEST_CASE("pooling: validate() rejects what PyTorch rejects") {
  using tracemod::shape_error;
  using tracemod::value_error;
  const auto ok = geometry(1, 2, 8, 8, 3, 3, 2, 2, 1, 1);
  CHECK_NOTHROW(k::validate(ok, "max_pool2d"));
  auto g = ok;
  g.kernel_w = 0;
  CHECK_THROWS_WITH_AS(k::validate(g, "max_pool2d"), "max_pool2d: kernel size must be positive, got 3x0", value_error);
  g = ok;
  g.stride_h = 0;
  CHECK_THROWS_WITH_AS(k::validate(g, "avg_pool2d"), "avg_pool2d: stride must be positive, got 0x2", value_error);
  g = ok;
  g.dilation_h = -1;
  CHECK_THROWS_AS(k::validate(g, "max_pool2d"), value_error);
  g = ok;
  g.pad_w = -1;
  CHECK_THROWS_AS(k::validate(g, "max_pool2d"), value_error);
  g = ok;
  g.pad_h = 2;
  CHECK_THROWS_WITH_AS(k::validate(g, "max_pool2d"),
                       "max_pool2d: padding 2x1 must be at most half the kernel size 3x3", value_error);
  g = geometry(1, 1, 3, 3, 5, 5, 1, 1, 0, 0);
  CHECK_THROWS_WITH_AS(k::validate(g, "max_pool2d"), doctest::Contains("larger than the padded input 3x3"),
                       shape_error);
  g = geometry(1, 1, 3, 3, 3, 3, 1, 1, 0, 0);
  g.dilation_w = 2;  // spans 5 columns of 3
  CHECK_THROWS_WITH_AS(k::max_pool2d(g, nullptr, nullptr), doctest::Contains("spans 3x5"), shape_error);
  g = geometry(1, 1, 0, 4, 1, 1, 1, 1, 0, 0);
  CHECK_THROWS_WITH_AS(k::validate(g, "max_pool2d"), doctest::Contains("0x4 is empty"), shape_error);
  g = geometry(-1, 1, 4, 4, 1, 1, 1, 1, 0, 0);
  CHECK_THROWS_AS(k::validate(g, "max_pool2d"), shape_error);
  g = ok;
  g.dilation_w = 2;
  CHECK_THROWS_WITH_AS(k::avg_pool2d(g, nullptr, nullptr), doctest::Contains("dilation"), value_error);
  CHECK_THROWS_AS(k::adaptive_avg_pool2d(nullptr, nullptr, 1, 1, 0, 3, 1, 1), shape_error);
  CHECK_THROWS_AS(k::adaptive_avg_pool2d(nullptr, nullptr, 1, 1, 3, 3, -1, 1), shape_error);
}

TEST_CASE("pooling: empty batch or channels succeed and write nothing") {
  // Real buffers holding a sentinel: a write (or a read past an empty input, under ASan) would show.
  const std::vector<float> x = random_values(3 * 8 * 8, 9);
  const std::vector<float> untouched(3 * 4 * 4, 42.0f);
  std::vector<float> y = untouched;
  const auto g = geometry(0, 3, 8, 8, 3, 3, 2, 2, 1, 1);
  CHECK_NOTHROW(k::max_pool2d(g, x.data(), y.data()));
  CHECK_NOTHROW(k::avg_pool2d(g, x.data(), y.data()));
  CHECK_NOTHROW(k::max_pool2d(geometry(2, 0, 8, 8, 2, 2, 2, 2, 0, 0), x.data(), y.data()));
  CHECK_NOTHROW(k::adaptive_avg_pool2d(x.data(), y.data(), 0, 3, 7, 7, 1, 1));
  CHECK_NOTHROW(k::adaptive_avg_pool2d(x.data(), y.data(), 1, 3, 7, 7, 0, 1));
  CHECK(y == untouched);
}

}  // namespace tmod_test_kernels_pooling
