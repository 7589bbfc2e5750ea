#include <tracemod/core/error.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/conv2d.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tmod_test_kernels_conv2d {

namespace {

namespace kern = tracemod::kernels;

constexpr float sentinel = 12345.0f;

std::string describe(const kern::conv2d_geometry& g) {
  const auto s = [](std::int64_t v) { return std::to_string(v); };
  return "n=" + s(g.n) + " c=" + s(g.c) + " h=" + s(g.h) + " w=" + s(g.w) + " k=" + s(g.k) + " r=" + s(g.r) +
         " s=" + s(g.s) + " stride=" + s(g.stride_h) + "," + s(g.stride_w) + " pad=" + s(g.pad_h) + "," +
         s(g.pad_w) + " dil=" + s(g.dil_h) + "," + s(g.dil_w) + " groups=" + s(g.groups);
}

// Buffers one float past a vector's start (never SIMD-aligned), sized exactly: sanitizers catch
// over-reads; the output has one guard float after it.
std::vector<float> random_buffer(std::int64_t n, std::mt19937& gen) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n + 1), sentinel);
  for (std::int64_t i = 1; i <= n; ++i) v[static_cast<std::size_t>(i)] = dist(gen);
  return v;
}

std::vector<float> absolute(std::vector<float> v) {
  for (float& x : v) x = std::abs(x);
  return v;
}

// conv2d against conv2d_reference; the tolerance of each output scales with the sum of the absolute
// products that make it up (the reference run on |input|, |weight|, |bias|).
// `run(input, weight, bias, out)` (bias null without one) against conv2d_reference.
template <class Run>
void check_against_reference(const kern::conv2d_geometry& g, bool with_bias, float tolerance, const Run& run) {
  CAPTURE(describe(g));
  CAPTURE(with_bias);
  std::mt19937 gen(static_cast<unsigned>(g.c * 131 + g.k * 17 + g.h * 7 + g.r + g.groups));
  const std::int64_t out_size = g.n * g.k * g.out_h() * g.out_w();
  const auto input = random_buffer(g.n * g.c * g.h * g.w, gen);
  const auto weight = random_buffer(g.k * (g.c / g.groups) * g.r * g.s, gen);
  const auto bias = random_buffer(g.k, gen);
  std::vector<float> out(static_cast<std::size_t>(out_size + 2), sentinel);
  std::vector<float> expected(static_cast<std::size_t>(out_size));
  std::vector<float> magnitude(static_cast<std::size_t>(out_size));
  const auto abs_input = absolute(input), abs_weight = absolute(weight), abs_bias = absolute(bias);

  run(input.data() + 1, weight.data() + 1, with_bias ? bias.data() + 1 : nullptr, out.data() + 1);
  kern::conv2d_reference(g, input.data() + 1, weight.data() + 1, with_bias ? bias.data() + 1 : nullptr,
                         expected.data());
  kern::conv2d_reference(g, abs_input.data() + 1, abs_weight.data() + 1, with_bias ? abs_bias.data() + 1 : nullptr,
                         magnitude.data());

  for (std::int64_t i = 0; i < out_size; ++i) {
    const float got = out[static_cast<std::size_t>(i + 1)], want = expected[static_cast<std::size_t>(i)];
    if (std::abs(got - want) > tolerance * magnitude[static_cast<std::size_t>(i)] + 1e-30f) {
      CAPTURE(i);
      CHECK(got == doctest::Approx(want));
      return;
    }
  }
  CHECK(out.front() == sentinel);
  CHECK(out.back() == sentinel);
}

void check_conv(const kern::conv2d_geometry& g, bool with_bias,
                kern::conv2d_algorithm algorithm = kern::conv2d_algorithm::automatic, float tolerance = 1e-5f) {
  CAPTURE(static_cast<int>(algorithm));
  check_against_reference(g, with_bias, tolerance, [&](const float* input, const float* weight, const float* bias, float* out) {
    kern::conv2d(g, input, weight, bias, out, algorithm);
  });
}

// Winograd F(m x m, 3x3) by the tiling given (not conv2d_winograd_tile's choice), its filters
// transformed on the call or beforehand (kept).
void winograd_with_tile(const kern::conv2d_geometry& g, std::int64_t m, bool kept, const float* input,
                        const float* weight, const float* bias, float* out) {
  const kern::detail::winograd_tiling tl{g.n, g.h, g.w, g.pad_h, g.pad_w, g.out_h(), g.out_w(), m};
  if (!kept) {
    kern::detail::conv_winograd(tl, g.c, g.k, input, {.weight = weight}, bias, out);
    return;
  }
  kern::aligned_floats filters(static_cast<std::size_t>(kern::detail::winograd_filters_size(m, g.k, g.c)));
  kern::detail::winograd_transform_filters(m, g.k, g.c, weight, filters.data());
  kern::detail::conv_winograd(tl, g.c, g.k, input, {.kept = filters.data()}, bias, out);
}

// g's output at `threads` threads by Winograd: its filters transformed on the call, or the `kept` ones
// (from conv2d_winograd_filters) when given.
std::vector<float> winograd_at_threads(const kern::conv2d_geometry& g, int threads, const float* input,
                                       const float* weight, const float* bias, const float* kept = nullptr) {
  tracemod::set_num_threads(threads);
  std::vector<float> out(static_cast<std::size_t>(g.n * g.k * g.out_h() * g.out_w()));
  if (kept != nullptr)
    kern::conv2d_winograd(g, input, kept, bias, out.data());
  else
    kern::conv2d(g, input, weight, bias, out.data(), kern::conv2d_algorithm::winograd);
  return out;
}

kern::conv2d_geometry geometry(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                               std::int64_t r, std::int64_t s) {
  return {n, c, h, w, k, r, s};
}

// A 3x3 stride-1 convolution (Winograd's) with the padding given.
kern::conv2d_geometry geometry_3x3(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                                   std::int64_t pad_h, std::int64_t pad_w) {
  auto g = geometry(n, c, h, w, k, 3, 3);
  g.pad_h = pad_h;
  g.pad_w = pad_w;
  return g;
}

}  // namespace

TEST_CASE("conv2d_reference: hand-computed outputs") {
  // 3x3 input 1..9, 2x2 kernel of ones: each output sums a 2x2 window.
  const float input[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const float ones[] = {1, 1, 1, 1};
  float out[9] = {};
  kern::conv2d_reference(geometry(1, 1, 3, 3, 1, 2, 2), input, ones, nullptr, out);
  CHECK(out[0] == 12);
  CHECK(out[1] == 16);
  CHECK(out[2] == 24);
  CHECK(out[3] == 28);

  // Padding 1, stride 2, bias 0.5: windows centred on the corners see 2x2 of the input.
  auto g = geometry(1, 1, 3, 3, 1, 2, 2);
  g.pad_h = g.pad_w = 1;
  g.stride_h = g.stride_w = 2;
  const float bias = 0.5f;
  REQUIRE(g.out_h() == 2);
  kern::conv2d_reference(g, input, ones, &bias, out);
  CHECK(out[0] == 1.5f);       // input(0, 0)
  CHECK(out[1] == 5.5f);       // input(0, 1..2)
  CHECK(out[2] == 11.5f);      // input(1..2, 0)
  CHECK(out[3] == 28.5f);      // input(1..2, 1..2)

  // Dilation 2: a 2x2 kernel [1 2; 3 4] touches the four corners.
  const float taps[] = {1, 2, 3, 4};
  auto d = geometry(1, 1, 3, 3, 1, 2, 2);
  d.dil_h = d.dil_w = 2;
  REQUIRE(d.out_h() == 1);
  kern::conv2d_reference(d, input, taps, nullptr, out);
  CHECK(out[0] == 1 * 1 + 2 * 3 + 3 * 7 + 4 * 9);
}

TEST_CASE("conv2d_geometry: PyTorch output extents") {
  auto g = geometry(1, 1, 5, 7, 1, 3, 2);
  CHECK(g.out_h() == 3);
  CHECK(g.out_w() == 6);
  g.stride_h = 2;
  g.pad_w = 2;
  g.dil_w = 3;
  CHECK(g.out_h() == 2);   // (5 - 2 - 1) / 2 + 1
  CHECK(g.out_w() == 8);   // 7 + 4 - 3 - 1 + 1
  CHECK(geometry(1, 1, 2, 2, 1, 5, 5).out_h() == 0);
  CHECK(geometry(1, 1, 224, 224, 64, 7, 7).out_h() == 218);
}

TEST_CASE("conv2d: plain, padded, strided, dilated, non-square, batched") {
  std::vector<kern::conv2d_geometry> cases = {
      geometry(1, 3, 8, 8, 4, 3, 3),
      geometry(2, 5, 9, 11, 7, 3, 2),
      geometry(1, 1, 1, 1, 1, 1, 1),
      geometry(3, 6, 5, 4, 9, 1, 1),           // 1x1: the GEMM reads the input in place
      geometry(1, 64, 30, 30, 13, 3, 3),       // reduction 576 > one k block; 784 positions > one n block
      geometry(1, 20, 40, 40, 17, 1, 1),       // 1600 positions: several n blocks of whole rows
      geometry(1, 2, 7, 13, 3, 5, 1),
  };
  auto padded = geometry(1, 4, 10, 9, 6, 3, 3);
  padded.pad_h = 1;
  padded.pad_w = 2;
  cases.push_back(padded);
  auto strided = geometry(2, 3, 15, 16, 8, 7, 7);
  strided.stride_h = strided.stride_w = 2;
  strided.pad_h = strided.pad_w = 3;
  cases.push_back(strided);
  auto uneven_stride = geometry(1, 5, 12, 13, 4, 3, 3);
  uneven_stride.stride_h = 3;
  uneven_stride.stride_w = 2;
  uneven_stride.pad_w = 1;
  cases.push_back(uneven_stride);
  auto dilated = geometry(1, 3, 12, 14, 5, 3, 3);
  dilated.dil_h = 2;
  dilated.dil_w = 3;
  dilated.pad_h = 2;
  cases.push_back(dilated);
  auto wide_rows = geometry(1, 8, 3, 70, 9, 3, 3);   // output rows longer than a vector, two-run reads
  wide_rows.pad_h = wide_rows.pad_w = 1;
  cases.push_back(wide_rows);
  auto seven = geometry(1, 64, 7, 7, 12, 3, 3);      // 49 positions: a column past whole vectors, two k blocks
  seven.pad_h = seven.pad_w = 1;
  cases.push_back(seven);
  auto fourteen = geometry(2, 8, 14, 14, 19, 3, 3);  // 196 positions: four columns past whole vectors
  fourteen.pad_h = fourteen.pad_w = 1;
  cases.push_back(fourteen);
  auto narrow = geometry(1, 9, 40, 5, 16, 3, 3);     // output rows shorter than a vector
  narrow.pad_h = narrow.pad_w = 1;
  cases.push_back(narrow);
  for (const auto& g : cases) {
    check_conv(g, true);
    check_conv(g, false);
  }
}

TEST_CASE("conv2d: im2col at stride 2 (runs of every other input column), partial vectors, no over-read") {
  // The packing reads stride-2 output rows as runs of every other input column, one pair of loads
  // per run, and blends the runs of a vector that wraps to the next output row; vectors past the
  // last position keep only their valid lanes. A run load may not leave the padded plane under the
  // largest (r, s) shift: with stride_h 1 and no padding, rows wrap one column apart, so loads near
  // the plane's end must fall back to lane-by-lane reads.
  const auto strided = [](std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t r,
                          std::int64_t stride_h, std::int64_t pad, std::int64_t dil) {
    auto g = geometry(1, c, h, w, k, r, r);
    g.stride_h = stride_h;
    g.stride_w = 2;
    g.pad_h = g.pad_w = pad;
    g.dil_h = g.dil_w = dil;
    return g;
  };
  const std::vector<kern::conv2d_geometry> cases = {
      strided(40, 56, 56, 9, 1, 2, 0, 1),  // ResNet's downsampling 1x1: 28-wide output rows
      strided(20, 15, 15, 6, 3, 2, 1, 1),  // 8-wide output rows: every vector wraps
      strided(20, 14, 14, 6, 3, 2, 1, 1),  // 7x7 output: 49 positions, a one-lane last vector
      strided(20, 9, 71, 5, 3, 2, 1, 1),   // 36-wide output rows, several blocks of runs
      strided(20, 20, 21, 7, 3, 2, 2, 2),  // dilated
      strided(6, 5, 9, 3, 1, 1, 0, 1),     // stride (1, 2), unpadded: rows wrap one column apart
      strided(20, 6, 17, 4, 3, 1, 0, 1),   // the same under a 3x3 shift
  };
  for (const auto& g : cases) check_conv(g, true, kern::conv2d_algorithm::direct);
}

TEST_CASE("conv2d: each thread's padded copy follows the input from call to call, at 1 to 3 threads") {
  // A thread pads an image once per call and reuses the copy for the rest of that call: a later call
  // on the same buffer with new values, or after another padded convolution on the same thread, must
  // see the new input, however the threads share the GEMM (columns at 2, tiles at 3).
  const kern::conv2d_geometry g{.n = 1, .c = 24, .h = 28, .w = 28, .k = 40, .r = 3, .s = 3, .stride_h = 2, .stride_w = 2,
                                .pad_h = 1, .pad_w = 1};
  const kern::conv2d_geometry other{.n = 2, .c = 24, .h = 9, .w = 9, .k = 8, .r = 3, .s = 3, .pad_h = 2, .pad_w = 2,
                                    .dil_h = 2, .dil_w = 2};
  std::mt19937 gen(17);
  auto input = random_buffer(g.c * g.h * g.w, gen);
  const auto weight = random_buffer(g.k * g.c * 9, gen), bias = random_buffer(g.k, gen);
  const auto other_input = random_buffer(other.n * other.c * other.h * other.w, gen);
  const auto other_weight = random_buffer(other.k * other.c * 9, gen);
  const std::int64_t out_size = g.k * g.out_h() * g.out_w();
  std::vector<float> out(static_cast<std::size_t>(out_size)), expected(out.size());
  std::vector<float> other_out(static_cast<std::size_t>(other.n * other.k * other.out_h() * other.out_w()));
  const int before = tracemod::get_num_threads();
  for (const int threads : {1, 2, 3}) {
    CAPTURE(threads);
    tracemod::set_num_threads(threads);
    for (int round = 0; round < 3; ++round) {
      CAPTURE(round);
      for (float& x : input) x = -x + 0.25f * static_cast<float>(round);  // new values, same address
      if (round == 2) kern::conv2d(other, other_input.data() + 1, other_weight.data() + 1, nullptr, other_out.data());
      kern::conv2d(g, input.data() + 1, weight.data() + 1, bias.data() + 1, out.data(), kern::conv2d_algorithm::direct);
      kern::conv2d_reference(g, input.data() + 1, weight.data() + 1, bias.data() + 1, expected.data());
      for (std::size_t i = 0; i < out.size(); ++i)
        if (std::abs(out[i] - expected[i]) > 1e-4f) {
          CAPTURE(i);
          REQUIRE(out[i] == doctest::Approx(expected[i]));
        }
    }
  }
  tracemod::set_num_threads(before);
}

TEST_CASE("conv2d: 1x1 with at most 32 input channels (gemm_small_k), every epilogue") {
  // Edges of the small-k path: 1 and 32 channels (33 takes the blocked GEMM), whole and partial row
  // panels, planes of exactly one column panel, one and a half (a two-vector partial panel), under
  // one vector, several panels plus a one-vector remainder, one panel plus 22 columns; a batch of two.
  const std::vector<kern::conv2d_geometry> cases = {
      geometry(1, 1, 4, 8, 8, 1, 1),   geometry(2, 32, 3, 11, 9, 1, 1), geometry(1, 33, 4, 8, 16, 1, 1),
      geometry(1, 16, 5, 1, 17, 1, 1), geometry(1, 24, 6, 17, 3, 1, 1), geometry(2, 7, 4, 12, 8, 1, 1),
      geometry(1, 5, 6, 9, 10, 1, 1),
  };
  for (const auto& g : cases)
    for (const bool with_bias : {false, true})
      for (const bool with_residual : {false, true})
        for (const auto act : {kern::activation::none, kern::activation::relu, kern::activation::relu6}) {
          CAPTURE(describe(g));
          CAPTURE(with_bias);
          CAPTURE(with_residual);
          CAPTURE(static_cast<int>(act));
          std::mt19937 gen(static_cast<unsigned>(g.c * 131 + g.k * 17 + g.h * 7 + g.w));
          const std::int64_t out_size = g.n * g.k * g.h * g.w;
          const auto input = random_buffer(g.n * g.c * g.h * g.w, gen);
          const auto weight = random_buffer(g.k * g.c, gen);
          const auto bias = random_buffer(g.k, gen);
          auto residual = random_buffer(out_size, gen);
          for (float& x : residual) x *= 8.0f;  // both clamps of relu6 happen
          const auto abs_input = absolute(input), abs_weight = absolute(weight), abs_bias = absolute(bias);
          std::vector<float> out(static_cast<std::size_t>(out_size + 2), sentinel);
          std::vector<float> expected(static_cast<std::size_t>(out_size)), magnitude(expected.size());
          kern::conv2d_bias_activation(g, input.data() + 1, weight.data() + 1,
                                       {with_bias ? bias.data() + 1 : nullptr,
                                        with_residual ? residual.data() + 1 : nullptr, act},
                                       out.data() + 1);
          kern::conv2d_reference(g, input.data() + 1, weight.data() + 1, with_bias ? bias.data() + 1 : nullptr,
                                 expected.data());
          kern::conv2d_reference(g, abs_input.data() + 1, abs_weight.data() + 1,
                                 with_bias ? abs_bias.data() + 1 : nullptr, magnitude.data());
          for (std::int64_t i = 0; i < out_size; ++i) {
            const auto at = static_cast<std::size_t>(i);
            float want = expected[at] + (with_residual ? residual[at + 1] : 0.0f);
            if (act != kern::activation::none) want = std::max(want, 0.0f);
            if (act == kern::activation::relu6) want = std::min(want, 6.0f);
            const float got = out[at + 1];
            if (std::abs(got - want) > 1e-5f * (magnitude[at] + (with_residual ? 8.0f : 0.0f)) + 1e-30f) {
              CAPTURE(i);
              CHECK(got == doctest::Approx(want));
              break;
            }
          }
          CHECK(out.front() == sentinel);
          CHECK(out.back() == sentinel);
        }
}

TEST_CASE("conv2d: grouped and depthwise") {
  auto two_groups = geometry(2, 6, 9, 8, 10, 3, 3);
  two_groups.groups = 2;
  two_groups.pad_h = two_groups.pad_w = 1;
  auto depthwise = geometry(2, 12, 11, 19, 12, 3, 3);
  depthwise.groups = 12;
  depthwise.pad_h = depthwise.pad_w = 1;
  auto depthwise_strided = geometry(1, 8, 20, 21, 8, 5, 3);
  depthwise_strided.groups = 8;
  depthwise_strided.stride_h = 2;
  depthwise_strided.stride_w = 3;
  depthwise_strided.pad_h = 2;
  depthwise_strided.pad_w = 2;
  depthwise_strided.dil_w = 2;
  auto mobilenet = geometry(1, 16, 15, 15, 16, 3, 3);  // stride 2, pad 1: the first tap starts at ox = 1
  mobilenet.groups = 16;
  mobilenet.stride_h = mobilenet.stride_w = 2;
  mobilenet.pad_h = mobilenet.pad_w = 1;
  auto multiplier = geometry(1, 4, 10, 37, 8, 3, 3);  // depthwise with two filters per channel
  multiplier.groups = 4;
  multiplier.pad_w = 1;
  auto wide_groups = geometry(1, 8, 6, 6, 4, 1, 1);   // 4 groups of 2 inputs -> 1 output
  wide_groups.groups = 4;
  for (const auto& g : {two_groups, depthwise, depthwise_strided, mobilenet, multiplier, wide_groups}) {
    check_conv(g, true);
    check_conv(g, false);
  }
}

TEST_CASE("conv2d: depthwise at strides 1 to 4 and with dilation reads only the right columns") {
  for (std::int64_t stride = 1; stride <= 4; ++stride)
    for (std::int64_t dil = 1; dil <= 2; ++dil)
      for (std::int64_t w : {5, 17, 33}) {
        auto g = geometry(2, 6, 9, w, 6, 3, 3);
        g.groups = 6;
        g.stride_h = 1 + stride % 2;
        g.stride_w = stride;
        g.pad_h = g.pad_w = 1;
        g.dil_w = dil;
        check_conv(g, true);
      }
}

// Planes up to 56x56 run channel-blocked (a vector lane per plane, simd_width planes at once, the
// last block of a run partly filled); larger ones run row by row on de-interleaved copies.
TEST_CASE("conv2d: depthwise on small planes (7x7, 14x14), channel-blocked") {
  const auto depthwise = [](std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t stride,
                            std::int64_t pad, std::int64_t dil) {
    auto g = geometry(2, c, h, w, c, k, k);
    g.groups = c;
    g.stride_h = g.stride_w = stride;
    g.pad_h = g.pad_w = pad;
    g.dil_h = g.dil_w = dil;
    return g;
  };
  for (std::int64_t size : {7, 14})
    for (std::int64_t stride : {1, 2}) {
      check_conv(depthwise(5, size, size, 3, stride, 1, 1), true);   // MobileNetV2's
      check_conv(depthwise(3, size, size, 3, stride, 2, 2), true);   // dilated, same width
      check_conv(depthwise(3, size, size, 5, stride, 2, 1), false);  // 5x5
      check_conv(depthwise(3, size, size, 3, stride, 0, 1), true);   // narrower output
      check_conv(depthwise(3, size, size, 3, stride, 2, 1), true);   // wider output
    }
  check_conv(depthwise(4, 5, 9, 3, 1, 1, 1), true);   // odd width, short plane
  check_conv(depthwise(4, 9, 5, 3, 1, 1, 1), true);   // odd width, tall plane
  check_conv(depthwise(4, 3, 3, 3, 1, 1, 1), true);   // smaller than a vector (AVX2 and up)
  check_conv(depthwise(4, 3, 3, 3, 1, 2, 1), true);   // input smaller than a vector, output not
  check_conv(depthwise(4, 5, 5, 3, 2, 1, 1), true);   // output smaller than a vector, input not
  check_conv(depthwise(37, 7, 7, 3, 1, 1, 1), true);  // 74 planes: full blocks and a partial one
  check_conv(depthwise(37, 14, 14, 3, 2, 1, 1), true);
  check_conv(depthwise(4, 11, 13, 3, 2, 1, 1), true);
  auto rectangular = depthwise(4, 7, 9, 3, 1, 1, 1);  // different padding and dilation per axis
  rectangular.pad_h = 2;
  rectangular.dil_h = 2;
  check_conv(rectangular, true);
  auto multiplier = depthwise(3, 7, 7, 3, 1, 1, 1);  // three filters per channel share a copy
  multiplier.k = 9;
  check_conv(multiplier, true);
  // Outputs of 8 to 16 cache lines: each block prefetches the next block's output planes, across
  // the two images and into a partial last block.
  check_conv(depthwise(37, 14, 14, 3, 1, 1, 1), true);
  check_conv(depthwise(37, 28, 28, 3, 2, 1, 1), false);
  check_conv(depthwise(21, 12, 12, 3, 1, 1, 1), true);
  auto wide_multiplier = depthwise(7, 14, 14, 3, 1, 1, 1);  // 21 planes of 14x14 from 7 inputs
  wide_multiplier.k = 21;
  check_conv(wide_multiplier, true);
}

TEST_CASE("conv2d: depthwise on planes too large to block, row by row, at strides 1 to 3 and dilated") {
  for (std::int64_t stride = 1; stride <= 3; ++stride)
    for (std::int64_t dil = 1; dil <= 2; ++dil) {
      auto g = geometry(1, 3, 72, 75, 3, 3, 3);
      g.groups = 3;
      g.stride_h = g.stride_w = stride;
      g.pad_h = g.pad_w = dil;
      g.dil_h = g.dil_w = dil;
      check_conv(g, true);
    }
  auto multiplier = geometry(1, 2, 72, 75, 4, 3, 3);  // two filters per channel share a copy
  multiplier.groups = 2;
  multiplier.pad_h = multiplier.pad_w = 1;
  check_conv(multiplier, true);
}

// Winograd F(4x4, 3x3) against the float32 reference: tile edges (outputs not a multiple of 4),
// padding 0 to 2, batches, channel counts across GEMM blocks and vectors. Its transforms add
// rounding; measured worst case over these shapes is below 2e-6 of the absolute-product sum.
TEST_CASE("conv2d: few input channels run the direct kernel at strides 1 to 3, padded, dilated, odd widths") {
  std::vector<kern::conv2d_geometry> cases;
  const auto add = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t r,
                       std::int64_t stride, std::int64_t pad) {
    auto g = geometry(n, c, h, w, k, r, r);
    g.stride_h = g.stride_w = stride;
    g.pad_h = g.pad_w = pad;
    cases.push_back(g);
  };
  for (const std::int64_t c : {1, 3, 4})
    for (const std::int64_t stride : {1, 2})
      for (const std::int64_t pad : {0, 1, 3}) {
        // Output widths 35 to 44, none a multiple of 16: whole vectors and a partial one; odd input
        // widths at stride 2 for odd c (the last column is read by no output).
        const std::int64_t out_w = 33 + 2 * c + pad;
        add(1, c, 11 + pad, (out_w - 1) * stride + 3 - 2 * pad + (stride - 1) * (c % 2), 6, 3, stride, pad);
      }
  add(1, 3, 40, 80, 32, 3, 2, 1);    // the MobileNetV2 stem's shape, smaller: 40 x 40 out
  add(2, 3, 35, 101, 10, 7, 2, 3);   // the ResNet stem's 7x7, two images, 10 filters: a partial block
  add(1, 16, 9, 66, 5, 3, 2, 1);     // reduction 144, at the rule's limit
  add(1, 2, 23, 35, 7, 5, 1, 2);     // 5x5, 17 output rows
  add(1, 3, 14, 110, 9, 3, 3, 1);    // stride 3: three phases per row
  cases.push_back({.n = 1, .c = 3, .h = 21, .w = 77, .k = 8, .r = 3, .s = 2, .stride_h = 3, .stride_w = 2, .pad_w = 1});
  const kern::conv2d_geometry dilated{.n = 1, .c = 3, .h = 17, .w = 45, .k = 9, .r = 3, .s = 3,
                                      .pad_h = 1, .pad_w = 2, .dil_h = 2, .dil_w = 3};
  cases.push_back(dilated);
  auto dilated_strided = dilated;
  dilated_strided.w = 90;
  dilated_strided.stride_w = 2;
  cases.push_back(dilated_strided);
  for (const auto& g : cases) {
    CAPTURE(describe(g));
    REQUIRE(kern::detail::runs_conv_direct(g));
    check_conv(g, true);
    check_conv(g, false);
    // 3x3 stride 1 with enough tiles would be Winograd's, were the channels more: the rule comes first.
    check_conv(g, true, kern::conv2d_algorithm::direct);
  }
  // Not taken: 1x1, grouped, rows shorter than two vectors, and reductions past the limit.
  auto pointwise = geometry(1, 3, 8, 64, 8, 1, 1);
  auto grouped = geometry(1, 4, 8, 64, 4, 3, 3);
  grouped.groups = 2;
  auto narrow = geometry(1, 3, 8, 8, 8, 3, 3);
  auto deep = geometry(1, 17, 8, 64, 8, 3, 3);  // 153 > 147
  for (const auto& g : {pointwise, grouped, narrow, deep}) {
    CAPTURE(describe(g));
    CHECK_FALSE(kern::detail::runs_conv_direct(g));
  }
}

TEST_CASE("conv2d: Winograd on 3x3 stride-1 convolutions") {
  std::vector<kern::conv2d_geometry> cases;
  const auto add = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                       std::int64_t pad_h, std::int64_t pad_w) { cases.push_back(geometry_3x3(n, c, h, w, k, pad_h, pad_w)); };
  add(1, 1, 3, 3, 1, 0, 0);    // one output, one partial tile
  add(1, 3, 8, 8, 4, 1, 1);    // whole tiles
  add(2, 5, 9, 11, 7, 1, 1);   // partial tiles on both edges, tiles across images in one vector
  add(1, 7, 13, 6, 3, 0, 2);   // unpadded rows, doubly padded columns
  add(3, 16, 7, 7, 24, 1, 1);  // 7x7: two tiles per side
  add(1, 64, 14, 14, 13, 1, 1);
  add(1, 600, 6, 6, 9, 1, 1);  // reduction over two GEMM k blocks
  add(1, 40, 10, 10, 48, 1, 1);  // filters gathered by transposes in whole blocks of W channels, then singly
  for (const auto& g : cases) {
    check_conv(g, true, kern::conv2d_algorithm::winograd, 1e-5f);
    check_conv(g, false, kern::conv2d_algorithm::winograd, 1e-5f);
  }
}

// F(2x2, 3x3), which conv2d takes only for few tiles and large filters (conv2d_winograd_tile), forced on
// the shapes above and on those of its own paths: products streamed panel by panel up to 16 tiles
// (one k block) and gemm_blocked past 16 tiles or one k block; conv_winograd by tile blocks and by
// panel groups (filters past half of L2, input within it). Filters transformed per call and kept.
TEST_CASE("conv2d: Winograd F(2x2, 3x3) on 3x3 stride-1 convolutions, per call and with kept filters") {
  std::vector<kern::conv2d_geometry> cases;
  const auto add = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                       std::int64_t pad_h, std::int64_t pad_w) { cases.push_back(geometry_3x3(n, c, h, w, k, pad_h, pad_w)); };
  add(1, 1, 3, 3, 1, 0, 0);      // one output, one partial tile
  add(1, 3, 8, 8, 4, 1, 1);      // whole tiles, 16 of them: streamed
  add(2, 5, 9, 11, 7, 1, 1);     // partial tiles on both edges, 72 tiles over two images
  add(1, 7, 13, 6, 3, 0, 2);     // unpadded rows, doubly padded columns
  add(1, 96, 7, 7, 80, 1, 1);    // a 7x7 plane: 16 tiles streamed, k past two panels
  add(1, 1100, 5, 5, 40, 1, 1);  // 9 tiles over more than one k block: gemm_blocked
  add(1, 128, 7, 7, 160, 1, 1);  // 1.3 MB of filters, 16 tiles: panel groups
  add(1, 40, 10, 10, 48, 1, 1);  // filters gathered by transposes in whole blocks of W channels, then singly
  for (const auto& g : cases)
    for (const bool kept : {false, true}) {
      CAPTURE(kept);
      for (const bool with_bias : {false, true})
        check_against_reference(g, with_bias, 1e-5f, [&](const float* input, const float* weight, const float* bias,
                                                         float* out) { winograd_with_tile(g, 2, kept, input, weight, bias, out); });
    }
}

TEST_CASE("conv2d: Winograd F(2x2, 3x3) results are bit-identical at 1 to 4 threads, kept filters or not") {
  auto blocks = geometry(2, 24, 13, 15, 20, 3, 3);  // 112 tiles
  blocks.pad_h = blocks.pad_w = 1;
  auto streamed = geometry(1, 96, 7, 7, 80, 3, 3);  // 16 tiles
  streamed.pad_h = streamed.pad_w = 1;
  auto groups = geometry(1, 128, 7, 7, 160, 3, 3);
  groups.pad_h = groups.pad_w = 1;
  const int threads_before = tracemod::get_num_threads();
  for (const auto& g : {blocks, streamed, groups}) {
    CAPTURE(describe(g));
    std::mt19937 gen(13);
    const auto input = random_buffer(g.n * g.c * g.h * g.w, gen);
    const auto weight = random_buffer(g.k * g.c * 9, gen);
    const auto bias = random_buffer(g.k, gen);
    const auto run = [&](int threads, bool kept) {
      tracemod::set_num_threads(threads);
      std::vector<float> out(static_cast<std::size_t>(g.n * g.k * g.out_h() * g.out_w()));
      winograd_with_tile(g, 2, kept, input.data() + 1, weight.data() + 1, bias.data() + 1, out.data());
      return out;
    };
    const std::vector<float> one = run(1, false);
    CHECK(run(1, true) == one);
    for (int threads = 2; threads <= 4; ++threads) {
      CHECK(run(threads, false) == one);
      CHECK(run(threads, true) == one);
    }
  }
  tracemod::set_num_threads(threads_before);
}

// Kept F(4x4) filters past half of L2 (2.4 MB at 64 -> 256 channels, with L2 up to 4 MiB), with a
// transformed input too large for panel groups (196 tiles, 1.8 MB): one block of tiles per thread.
TEST_CASE("conv2d_winograd: kept filters past half of L2, one block per thread, bit-identical at 1 to 4 threads") {
  const auto g = geometry_3x3(1, 64, 56, 56, 256, 1, 1);
  std::mt19937 gen(17);
  const auto input = random_buffer(g.n * g.c * g.h * g.w, gen);
  const auto weight = random_buffer(g.k * g.c * 9, gen);
  const auto bias = random_buffer(g.k, gen);
  const kern::aligned_floats filters = kern::conv2d_winograd_filters(g, weight.data() + 1);
  const int threads_before = tracemod::get_num_threads();
  const std::vector<float> one = winograd_at_threads(g, 1, input.data() + 1, weight.data() + 1, bias.data() + 1);
  for (int threads = 1; threads <= 4; ++threads)
    CHECK(winograd_at_threads(g, threads, input.data() + 1, weight.data() + 1, bias.data() + 1, filters.data()) == one);
  tracemod::set_num_threads(2);
  check_against_reference(g, true, 1e-5f, [&](const float* x, const float* w, const float* b, float* out) {
    const kern::aligned_floats kept = kern::conv2d_winograd_filters(g, w);
    kern::conv2d_winograd(g, x, kept.data(), b, out);
  });
  tracemod::set_num_threads(threads_before);
}

// Filters transformed on the call, at the sizes whose thread paths depend on L2 (docs/kernels.md): with
// 1 MiB of L2, 64@56 (0.6 MB of filters, 1.8 MB of input transformed) runs one block per thread, each
// transforming its own filters, and 128@28 (2.4 MB, 0.9 MB) by panel groups on more than one thread and
// as one block on one.
TEST_CASE("conv2d: Winograd with filters transformed per call is bit-identical at 1 to 4 threads") {
  const int threads_before = tracemod::get_num_threads();
  for (const auto& g : {geometry_3x3(1, 64, 56, 56, 64, 1, 1), geometry_3x3(1, 128, 28, 28, 128, 1, 1)}) {
    CAPTURE(describe(g));
    std::mt19937 gen(19);
    const auto input = random_buffer(g.n * g.c * g.h * g.w, gen);
    const auto weight = random_buffer(g.k * g.c * 9, gen);
    const auto bias = random_buffer(g.k, gen);
    const std::vector<float> one = winograd_at_threads(g, 1, input.data() + 1, weight.data() + 1, bias.data() + 1);
    for (int threads = 2; threads <= 4; ++threads)
      CHECK(winograd_at_threads(g, threads, input.data() + 1, weight.data() + 1, bias.data() + 1) == one);
    tracemod::set_num_threads(2);
    check_against_reference(g, true, 1e-5f, [&](const float* x, const float* w, const float* b, float* out) {
      kern::conv2d(g, x, w, b, out, kern::conv2d_algorithm::winograd);
    });
  }
  tracemod::set_num_threads(threads_before);
}

TEST_CASE("conv2d_winograd_tile: F(2x2) where F(4x4) has fewer tiles than a register tile's rows and large filters") {
  const auto square = [](std::int64_t n, std::int64_t channels, std::int64_t size) {
    return geometry_3x3(n, channels, size, size, channels, 1, 1);
  };
  // The rule's two sides, each from its measurement (docs/kernels.md): F(4x4)'s 4 tiles with 37.7 MB
  // of filters (512 channels) against 9.4 MB (256); 8 tiles at batch 2.
  CHECK(kern::conv2d_winograd_tile(square(1, 512, 7)) == 2);
  CHECK(kern::conv2d_winograd_tile(square(1, 384, 7)) == 2);
  CHECK(kern::conv2d_winograd_tile(square(1, 256, 7)) == 4);
  CHECK(kern::conv2d_winograd_tile(square(2, 512, 7)) == 4);
  CHECK(kern::conv2d_winograd_tile(square(1, 512, 14)) == 4);
  // The filters conv2d_winograd_filters makes follow it: 16 positions for F(2x2), 36 for F(4x4).
  std::vector<float> weight(static_cast<std::size_t>(384 * 384 * 9), 0.5f);
  CHECK(kern::conv2d_winograd_filters(square(1, 384, 7), weight.data()).size() ==
        static_cast<std::size_t>(kern::detail::winograd_filters_size(2, 384, 384)));
  CHECK(kern::conv2d_winograd_filters(square(2, 384, 7), weight.data()).size() ==
        static_cast<std::size_t>(kern::detail::winograd_filters_size(4, 384, 384)));
  // Other tile sides have no transforms: refused before anything is read or written.
  const kern::detail::winograd_tiling three{1, 7, 7, 1, 1, 7, 7, 3};
  CHECK_THROWS_WITH_AS(kern::detail::conv_winograd(three, 384, 384, nullptr, {.weight = weight.data()}, nullptr, nullptr),
                       "conv_winograd: Winograd tiles are 2x2 or 4x4 (F(2x2, 3x3), F(4x4, 3x3)), got side 3",
                       tracemod::value_error);
  CHECK_THROWS_AS(kern::detail::winograd_transform_filters(6, 384, 384, weight.data(), nullptr), tracemod::value_error);
  CHECK_THROWS_AS((void)kern::detail::winograd_filters_size(3, 384, 384), tracemod::value_error);
}

TEST_CASE("conv2d: pre-transformed Winograd filters give the same result as transforming per call") {
  auto g = geometry(2, 9, 10, 12, 11, 3, 3);
  g.pad_h = g.pad_w = 1;
  std::mt19937 gen(7);
  const auto input = random_buffer(g.n * g.c * g.h * g.w, gen);
  const auto weight = random_buffer(g.k * g.c * 9, gen);
  const auto bias = random_buffer(g.k, gen);
  const std::size_t out_size = static_cast<std::size_t>(g.n * g.k * g.out_h() * g.out_w());
  std::vector<float> per_call(out_size), pre(out_size);
  kern::conv2d(g, input.data() + 1, weight.data() + 1, bias.data() + 1, per_call.data(), kern::conv2d_algorithm::winograd);
  const kern::aligned_floats filters = kern::conv2d_winograd_filters(g, weight.data() + 1);
  kern::conv2d_winograd(g, input.data() + 1, filters.data(), bias.data() + 1, pre.data());
  CHECK(pre == per_call);
}

TEST_CASE("conv2d: Winograd refuses convolutions it cannot compute") {
  auto strided = geometry(1, 2, 8, 8, 2, 3, 3);
  strided.stride_w = 2;
  auto grouped = geometry(1, 4, 8, 8, 4, 3, 3);
  grouped.groups = 2;
  auto dilated = geometry(1, 2, 8, 8, 2, 3, 3);
  dilated.dil_h = 2;
  std::vector<float> buffer(1024, 0.0f);
  for (const auto& g : {strided, grouped, dilated, geometry(1, 2, 8, 8, 2, 5, 5)}) {
    CAPTURE(describe(g));
    CHECK_THROWS_AS(kern::conv2d(g, buffer.data(), buffer.data(), nullptr, buffer.data(), kern::conv2d_algorithm::winograd),
                    tracemod::value_error);
    CHECK_THROWS_AS((void)kern::conv2d_winograd_filters(g, buffer.data()), tracemod::value_error);
  }
}

TEST_CASE("conv2d: the process-wide algorithm switch reaches automatic calls only") {
  auto g = geometry(1, 4, 6, 6, 3, 3, 3);  // few tiles: automatic runs direct
  g.pad_h = g.pad_w = 1;
  std::mt19937 gen(3);
  const auto input = random_buffer(g.c * g.h * g.w, gen);
  const auto weight = random_buffer(g.k * g.c * 9, gen);
  std::vector<float> automatic(108), forced(108), direct(108), winograd(108);
  kern::conv2d(g, input.data() + 1, weight.data() + 1, nullptr, direct.data(), kern::conv2d_algorithm::direct);
  kern::conv2d(g, input.data() + 1, weight.data() + 1, nullptr, winograd.data(), kern::conv2d_algorithm::winograd);
  REQUIRE(direct != winograd);  // the two algorithms round differently
  kern::conv2d(g, input.data() + 1, weight.data() + 1, nullptr, automatic.data());
  CHECK(automatic == direct);
  kern::set_conv2d_algorithm(kern::conv2d_algorithm::winograd);
  kern::conv2d(g, input.data() + 1, weight.data() + 1, nullptr, forced.data());
  const auto explicit_direct = forced;
  kern::conv2d(g, input.data() + 1, weight.data() + 1, nullptr, forced.data(), kern::conv2d_algorithm::direct);
  kern::set_conv2d_algorithm(kern::conv2d_algorithm::automatic);
  CHECK(explicit_direct == winograd);
  CHECK(forced == direct);
  CHECK(kern::get_conv2d_algorithm() == kern::conv2d_algorithm::automatic);
}

TEST_CASE("conv2d: Winograd, depthwise and 1x1 results are bit-identical at 1 to 4 threads") {
  auto winograd = geometry(2, 24, 13, 15, 20, 3, 3);
  winograd.pad_h = winograd.pad_w = 1;
  auto depthwise = geometry(3, 16, 17, 17, 16, 3, 3);
  depthwise.groups = 16;
  depthwise.stride_h = depthwise.stride_w = 2;
  depthwise.pad_h = depthwise.pad_w = 1;
  auto pointwise = geometry(2, 40, 7, 7, 56, 1, 1);
  auto depthwise_7x7 = geometry(3, 37, 7, 7, 37, 3, 3);  // 111 planes: threads split blocks of planes
  depthwise_7x7.groups = 37;
  depthwise_7x7.pad_h = depthwise_7x7.pad_w = 1;
  auto depthwise_rows = geometry(1, 5, 70, 70, 5, 3, 3);  // row by row
  depthwise_rows.groups = 5;
  depthwise_rows.pad_h = depthwise_rows.pad_w = 1;
  const int threads_before = tracemod::get_num_threads();
  for (const auto& g : {winograd, depthwise, pointwise, depthwise_7x7, depthwise_rows}) {
    CAPTURE(describe(g));
    std::mt19937 gen(11);
    const auto input = random_buffer(g.n * g.c * g.h * g.w, gen);
    const auto weight = random_buffer(g.k * (g.c / g.groups) * g.r * g.s, gen);
    const auto bias = random_buffer(g.k, gen);
    const auto run = [&](int threads) {
      tracemod::set_num_threads(threads);
      std::vector<float> out(static_cast<std::size_t>(g.n * g.k * g.out_h() * g.out_w()));
      kern::conv2d(g, input.data() + 1, weight.data() + 1, bias.data() + 1, out.data(),
                   g.r == 3 && g.groups == 1 ? kern::conv2d_algorithm::winograd : kern::conv2d_algorithm::automatic);
      return out;
    };
    const std::vector<float> one = run(1);
    for (int threads = 2; threads <= 4; ++threads) CHECK(run(threads) == one);
  }
  tracemod::set_num_threads(threads_before);
}

TEST_CASE("conv2d: empty batch writes nothing") {
  float out = sentinel;
  kern::conv2d(geometry(0, 3, 5, 5, 4, 3, 3), nullptr, nullptr, nullptr, &out);
  CHECK(out == sentinel);
}

TEST_CASE("conv2d: validate() names the op and the offending values") {
  const auto expect_value_error = [](kern::conv2d_geometry g, const char* text) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(kern::validate(g, "conv2d"), doctest::Contains(text), tracemod::value_error);
  };
  auto g = geometry(1, 6, 8, 8, 4, 3, 3);
  g.groups = 4;
  expect_value_error(g, "in_channels 6 is not divisible by groups 4");
  g.groups = 3;
  expect_value_error(g, "out_channels 4 is not divisible by groups 3");
  g = geometry(1, 6, 8, 8, 4, 3, 3);
  g.stride_w = 0;
  expect_value_error(g, "stride must be positive, got (1, 0)");
  g = geometry(1, 6, 8, 8, 4, 3, 3);
  g.dil_h = -1;
  expect_value_error(g, "dilation must be positive, got (-1, 1)");
  g = geometry(1, 6, 8, 8, 4, 3, 3);
  g.pad_h = -2;
  expect_value_error(g, "padding must be non-negative, got (-2, 0)");
  g = geometry(1, 6, 8, 8, 4, 3, 3);
  g.groups = 0;
  expect_value_error(g, "groups must be positive");

  CHECK_THROWS_WITH_AS(kern::validate(geometry(1, 3, 4, 4, 2, 5, 5), "F.conv2d"),
                       doctest::Contains("F.conv2d: empty output: input (4, 4) padded by (0, 0) is smaller than "
                                         "the dilated kernel (5, 5)"),
                       tracemod::shape_error);
  CHECK_THROWS_AS(kern::validate(geometry(1, 0, 4, 4, 2, 1, 1), "conv2d"), tracemod::shape_error);
  CHECK_THROWS_AS(kern::conv2d(geometry(1, 3, 4, 4, 2, 5, 5), nullptr, nullptr, nullptr, nullptr),
                  tracemod::shape_error);
  CHECK_NOTHROW(kern::validate(geometry(1, 3, 5, 5, 2, 5, 5), "conv2d"));
}

}  // namespace tmod_test_kernels_conv2d
