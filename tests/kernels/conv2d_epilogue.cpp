// conv2d_bias_activation: bias, residual and activation applied as the conv stores its tiles, on
// every path (im2col GEMM with one and several k blocks and dot-product columns, 1x1 GEMM on large
// and small planes, depthwise, Winograd, the few-channel direct kernel).
#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/conv2d.hpp>
#include <tracemod/kernels/elementwise.hpp>

#include "thread_counts.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tmod_test_kernels_conv2d_epilogue {

namespace {

namespace kern = tracemod::kernels;

struct epilogue_case {
  const char* name;
  kern::conv2d_geometry g;
  kern::conv2d_algorithm algorithm = kern::conv2d_algorithm::direct;
};

// One geometry per code path of conv2d_bias_activation.
std::vector<epilogue_case> cases() {
  using algo = kern::conv2d_algorithm;
  kern::conv2d_geometry strided{2, 8, 11, 11, 12, 3, 3};
  strided.stride_h = strided.stride_w = 2;
  strided.pad_h = strided.pad_w = 1;
  kern::conv2d_geometry deep{1, 128, 6, 6, 8, 3, 3};  // 1152 rows of k: several k blocks
  deep.pad_h = deep.pad_w = 1;
  kern::conv2d_geometry seven{1, 16, 9, 9, 10, 3, 3};  // 7x7 outputs: dot-product columns
  kern::conv2d_geometry wide_1x1{2, 6, 12, 12, 9, 1, 1};
  kern::conv2d_geometry narrow_1x1{1, 64, 7, 7, 40, 1, 1};  // 49 pixels: a half-width tile and a dot column
  kern::conv2d_geometry depthwise{2, 6, 10, 9, 6, 3, 3};
  depthwise.groups = 6;
  depthwise.pad_h = depthwise.pad_w = 1;
  kern::conv2d_geometry depthwise_strided = depthwise;
  depthwise_strided.stride_h = depthwise_strided.stride_w = 2;
  kern::conv2d_geometry depthwise_7x7{2, 19, 7, 7, 19, 3, 3};  // channel-blocked, a partial block
  depthwise_7x7.groups = 19;
  depthwise_7x7.pad_h = depthwise_7x7.pad_w = 1;
  kern::conv2d_geometry depthwise_14x14_dilated{1, 5, 14, 14, 5, 3, 3};
  depthwise_14x14_dilated.groups = 5;
  depthwise_14x14_dilated.pad_h = depthwise_14x14_dilated.pad_w = 2;
  depthwise_14x14_dilated.dil_h = depthwise_14x14_dilated.dil_w = 2;
  kern::conv2d_geometry depthwise_14x14_blocks{2, 37, 14, 14, 37, 3, 3};  // output prefetch, partial block
  depthwise_14x14_blocks.groups = 37;
  depthwise_14x14_blocks.pad_h = depthwise_14x14_blocks.pad_w = 1;
  kern::conv2d_geometry depthwise_rows{1, 3, 70, 70, 3, 3, 3};  // too large to block: row by row
  depthwise_rows.groups = 3;
  depthwise_rows.pad_h = depthwise_rows.pad_w = 1;
  depthwise_rows.stride_h = depthwise_rows.stride_w = 2;
  kern::conv2d_geometry winograd{2, 5, 13, 10, 7, 3, 3};
  winograd.pad_h = winograd.pad_w = 1;
  // 9 tiles (a partial row panel), 520 input channels (two k blocks), 40 output channels (a partial
  // panel and a partial vector of the output transform).
  kern::conv2d_geometry winograd_deep{1, 520, 9, 9, 40, 3, 3};
  winograd_deep.pad_h = winograd_deep.pad_w = 1;
  // 480 tiles of 16 in, 20 out channels: 3.3 MB of transformed input and products, several tile
  // blocks on any core with under 6 MB of L2 (split across threads from 2 threads on), partial
  // tiles on both edges.
  kern::conv2d_geometry winograd_blocks{2, 16, 62, 58, 20, 3, 3};
  winograd_blocks.pad_h = winograd_blocks.pad_w = 1;
  // 64 in, 136 out channels: five output-channel panels (the last partial) whose 1.5 MB of transformed
  // filters exceed half of a 2 MiB L2 while the 9 tiles' transformed input does not, so conv_winograd
  // runs by panel groups there: two groups at one thread, and a different split of the panels at
  // each of 2-4 threads.
  kern::conv2d_geometry winograd_groups{1, 64, 12, 12, 136, 3, 3};
  winograd_groups.pad_h = winograd_groups.pad_w = 1;
  kern::conv2d_geometry grouped{1, 8, 8, 8, 12, 3, 3};
  grouped.groups = 4;
  // Few input channels, the direct kernel: a stem at stride 2 (odd width, 10 filters: a partial
  // block of output channels), one channel at stride 1 with a 5x5 kernel.
  kern::conv2d_geometry stem{2, 3, 17, 75, 10, 3, 3};
  stem.stride_h = stem.stride_w = 2;
  stem.pad_h = stem.pad_w = 1;
  kern::conv2d_geometry one_channel{1, 1, 12, 37, 7, 5, 5};
  one_channel.pad_h = one_channel.pad_w = 2;
  return {{"im2col strided", strided},       {"im2col k blocks", deep},
          {"im2col dot columns", seven},     {"1x1 12x12", wide_1x1},
          {"1x1 7x7", narrow_1x1},           {"depthwise", depthwise},
          {"depthwise strided", depthwise_strided}, {"depthwise 7x7", depthwise_7x7},
          {"depthwise 14x14 dilated", depthwise_14x14_dilated}, {"depthwise 14x14 blocks", depthwise_14x14_blocks},
          {"depthwise rows", depthwise_rows},
          {"winograd", winograd, algo::winograd},
          {"grouped", grouped},              {"winograd automatic", winograd, algo::automatic},
          {"winograd k blocks", winograd_deep, algo::winograd},
          {"winograd tile blocks", winograd_blocks, algo::winograd},
          {"winograd channel groups", winograd_groups, algo::winograd},
          {"few channels", stem},            {"few channels automatic", stem, algo::automatic},
          {"one channel 5x5", one_channel}};
}

std::vector<float> random_vector(std::int64_t n, std::mt19937& gen) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

std::int64_t out_size(const kern::conv2d_geometry& g) { return g.n * g.k * g.out_h() * g.out_w(); }

struct operands {
  std::vector<float> input, weight, bias, residual;
};

operands make_operands(const kern::conv2d_geometry& g, unsigned seed) {
  std::mt19937 gen(seed);
  operands o;
  o.input = random_vector(g.n * g.c * g.h * g.w, gen);
  o.weight = random_vector(g.k * (g.c / g.groups) * g.r * g.s, gen);
  o.bias = random_vector(g.k, gen);
  // Residuals of a size that makes relu6's upper clamp and relu's zeroing both happen.
  o.residual = random_vector(out_size(g), gen);
  for (float& x : o.residual) x *= 8.0f;
  return o;
}

float reference_activation(kern::activation a, float x) {
  if (a == kern::activation::none) return x;
  const float low = std::max(x, 0.0f);
  return a == kern::activation::relu6 ? std::min(low, 6.0f) : low;
}

const char* activation_name(kern::activation a) {
  return a == kern::activation::none ? "none" : a == kern::activation::relu ? "relu" : "relu6";
}

}  // namespace

TEST_CASE("conv2d_bias_activation: equals conv, bias, residual add and activation as a scalar loop") {
  for (const epilogue_case& c : cases()) {
    const kern::conv2d_geometry& g = c.g;
    const operands o = make_operands(g, static_cast<unsigned>(g.c * 7 + g.k));
    const std::int64_t n = out_size(g);
    std::vector<float> conv(static_cast<std::size_t>(n)), magnitude(static_cast<std::size_t>(n));
    std::vector<float> abs_input = o.input, abs_weight = o.weight, abs_bias = o.bias;
    for (std::vector<float>* v : {&abs_input, &abs_weight, &abs_bias})
      for (float& x : *v) x = std::abs(x);
    for (const bool with_bias : {false, true}) {
      kern::conv2d_reference(g, o.input.data(), o.weight.data(), with_bias ? o.bias.data() : nullptr, conv.data());
      kern::conv2d_reference(g, abs_input.data(), abs_weight.data(), with_bias ? abs_bias.data() : nullptr,
                             magnitude.data());
      for (const bool with_residual : {false, true})
        for (const kern::activation a : {kern::activation::none, kern::activation::relu, kern::activation::relu6}) {
          CAPTURE(c.name);
          CAPTURE(with_bias);
          CAPTURE(with_residual);
          CAPTURE(activation_name(a));
          // One guard float on each side of the output.
          std::vector<float> out(static_cast<std::size_t>(n + 2), -777.0f);
          kern::conv2d_bias_activation(
              g, o.input.data(), o.weight.data(),
              {with_bias ? o.bias.data() : nullptr, with_residual ? o.residual.data() : nullptr, a}, out.data() + 1,
              c.algorithm);
          CHECK(out.front() == -777.0f);
          CHECK(out.back() == -777.0f);
          std::int64_t bad = 0;
          for (std::int64_t i = 0; i < n; ++i) {
            const auto k = static_cast<std::size_t>(i);
            const float pre = conv[k] + (with_residual ? o.residual[k] : 0.0f);
            const float want = reference_activation(a, pre);
            // Winograd's transforms round more than the direct sum: 1e-4 of the magnitude.
            const float tolerance = 1e-4f * (magnitude[k] + (with_residual ? std::abs(o.residual[k]) : 0.0f)) + 1e-6f;
            if (std::abs(out[k + 1] - want) > tolerance && bad++ == 0) {
              CAPTURE(i);
              CHECK(out[k + 1] == doctest::Approx(want));
            }
          }
          CHECK(bad == 0);
        }
    }
  }
}

TEST_CASE("conv2d_bias_activation: the bits of conv2d, then the add and relu kernels") {
  for (const epilogue_case& c : cases()) {
    CAPTURE(c.name);
    const kern::conv2d_geometry& g = c.g;
    const operands o = make_operands(g, static_cast<unsigned>(g.h * 13 + g.k));
    const auto n = static_cast<std::size_t>(out_size(g));
    std::vector<float> separate(n), fused(n);
    kern::conv2d(g, o.input.data(), o.weight.data(), o.bias.data(), separate.data(), c.algorithm);
    kern::binary(kern::add_op{}, separate.data(), o.residual.data(), separate.data(), out_size(g));
    std::vector<float> relu6 = separate;
    kern::unary(kern::relu_op{}, separate.data(), separate.data(), out_size(g));
    kern::unary(kern::relu6_op{}, relu6.data(), relu6.data(), out_size(g));
    kern::conv2d_bias_activation(g, o.input.data(), o.weight.data(),
                                 {o.bias.data(), o.residual.data(), kern::activation::relu}, fused.data(), c.algorithm);
    CHECK(thread_counts::same_bits(fused, separate));
    kern::conv2d_bias_activation(g, o.input.data(), o.weight.data(),
                                 {o.bias.data(), o.residual.data(), kern::activation::relu6}, fused.data(), c.algorithm);
    CHECK(thread_counts::same_bits(fused, relu6));
  }
}

TEST_CASE("conv2d_bias_activation: bit-identical at 1 to 4 threads on every path") {
  for (const epilogue_case& c : cases()) {
    const kern::conv2d_geometry& g = c.g;
    const operands o = make_operands(g, 5u);
    thread_counts::check_bit_identical(c.name, [&] {
      std::vector<float> out(static_cast<std::size_t>(out_size(g)));
      kern::conv2d_bias_activation(g, o.input.data(), o.weight.data(),
                                   {o.bias.data(), o.residual.data(), kern::activation::relu}, out.data(),
                                   c.algorithm);
      return out;
    });
  }
}

TEST_CASE("conv2d_winograd: filters transformed once give the bits of conv2d_bias_activation's Winograd") {
  kern::conv2d_geometry g{2, 5, 13, 10, 7, 3, 3};
  g.pad_h = g.pad_w = 1;
  kern::conv2d_geometry deep{1, 520, 9, 9, 40, 3, 3};  // two k blocks, a partial panel of filters
  deep.pad_h = deep.pad_w = 1;
  kern::conv2d_geometry wide{1, 64, 12, 12, 136, 3, 3};  // five panels of filters: panel groups
  wide.pad_h = wide.pad_w = 1;
  for (const kern::conv2d_geometry& geometry : {g, deep, wide}) {
    CAPTURE(geometry.c);
    const operands o = make_operands(geometry, 9u);
    const kern::aligned_floats filters = kern::conv2d_winograd_filters(geometry, o.weight.data());
    const auto n = static_cast<std::size_t>(out_size(geometry));
    for (const kern::activation a : {kern::activation::none, kern::activation::relu, kern::activation::relu6}) {
      CAPTURE(activation_name(a));
      const kern::conv2d_epilogue e{o.bias.data(), o.residual.data(), a};
      std::vector<float> want(n), got(n);
      kern::conv2d_bias_activation(geometry, o.input.data(), o.weight.data(), e, want.data(),
                                   kern::conv2d_algorithm::winograd);
      kern::conv2d_winograd(geometry, o.input.data(), filters.data(), e, got.data());
      CHECK(thread_counts::same_bits(got, want));
    }
    thread_counts::check_bit_identical("conv2d_winograd, filters kept", [&] {
      std::vector<float> out(n);
      kern::conv2d_winograd(geometry, o.input.data(), filters.data(),
                            {o.bias.data(), o.residual.data(), kern::activation::relu}, out.data());
      return out;
    });
  }
  kern::conv2d_geometry strided = g;
  strided.stride_h = 2;
  const operands o = make_operands(g, 9u);
  const kern::aligned_floats filters = kern::conv2d_winograd_filters(g, o.weight.data());
  CHECK_THROWS_AS(kern::conv2d_winograd(strided, o.input.data(), filters.data(), kern::conv2d_epilogue{}, nullptr),
                  tracemod::value_error);
}

TEST_CASE("conv2d_prefers_winograd_filters: from 16 tiles, 3x3 stride 1 only, and as the algorithm switch says") {
  const auto square = [](std::int64_t c, std::int64_t size) {
    return kern::conv2d_geometry{1, c, size, size, c, 3, 3, 1, 1, 1, 1};
  };
  CHECK(kern::conv2d_prefers_winograd_filters(square(64, 56)));  // 196 tiles
  CHECK(kern::conv2d_prefers_winograd_filters(square(256, 14)));  // 16
  CHECK_FALSE(kern::conv2d_prefers_winograd_filters(square(256, 12)));  // 9
  CHECK_FALSE(kern::conv2d_prefers_winograd_filters(square(256, 7)));  // 4
  CHECK(kern::conv2d_prefers_winograd_filters(square(512, 7)));  // 16 of F(2x2) (conv2d_winograd_tile)
  kern::conv2d_geometry strided = square(64, 56);
  strided.stride_h = strided.stride_w = 2;
  CHECK_FALSE(kern::conv2d_prefers_winograd_filters(strided));
  kern::set_conv2d_algorithm(kern::conv2d_algorithm::direct);
  CHECK_FALSE(kern::conv2d_prefers_winograd_filters(square(64, 56)));
  kern::set_conv2d_algorithm(kern::conv2d_algorithm::winograd);
  CHECK(kern::conv2d_prefers_winograd_filters(square(256, 7)));
  kern::set_conv2d_algorithm(kern::conv2d_algorithm::automatic);
}

TEST_CASE("relu and relu6: NaN passes, -0 becomes +0, in the vector and the scalar form") {
  const float nan = std::nanf("");
  for (const kern::activation a : {kern::activation::relu, kern::activation::relu6}) {
    CAPTURE(activation_name(a));
    CHECK(std::isnan(kern::detail::activate(a, nan)));
    CHECK(std::isnan(kern::detail::activate(a, kern::fbatch(nan)).get(0)));
    CHECK_FALSE(std::signbit(kern::detail::activate(a, -0.0f)));
    CHECK_FALSE(std::signbit(kern::detail::activate(a, kern::fbatch(-0.0f)).get(0)));
    for (const float x : {-3.0f, 0.5f, 5.999f, 6.0f, 6.5f, 1e30f}) {
      CAPTURE(x);
      CHECK(kern::detail::activate(a, x) == reference_activation(a, x));
      CHECK(kern::detail::activate(a, kern::fbatch(x)).get(0) == reference_activation(a, x));
    }
  }
}

}  // namespace tmod_test_kernels_conv2d_epilogue
