// Winograd (F(4x4, 3x3), and F(2x2, 3x3) where conv2d takes it) on every ResNet-18 3x3 stride-1 layer
// shape (batch 1) against a float64 direct convolution: the error bound docs/kernels.md states. The
// reference is computed for a spread of output channels (every tile position and the full reduction
// depth, at a fraction of the cost).
#include <tracemod/kernels/conv2d.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace tmod_test_kernels_conv2d_winograd_resnet {

namespace {

namespace kern = tracemod::kernels;

double reference_output(const kern::conv2d_geometry& g, const std::vector<float>& x, const std::vector<float>& w,
                        std::int64_t o, std::int64_t oy, std::int64_t ox) {
  double acc = 0;
  for (std::int64_t ci = 0; ci < g.c; ++ci)
    for (std::int64_t ry = 0; ry < 3; ++ry)
      for (std::int64_t sx = 0; sx < 3; ++sx) {
        const std::int64_t iy = oy - g.pad_h + ry, ix = ox - g.pad_w + sx;
        if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
        acc += static_cast<double>(x[static_cast<std::size_t>((ci * g.h + iy) * g.w + ix)]) *
               static_cast<double>(w[static_cast<std::size_t>(((o * g.c + ci) * 3 + ry) * 3 + sx)]);
      }
  return acc;
}

}  // namespace

TEST_CASE("conv2d: Winograd on the ResNet-18 3x3 layers is within 1e-4 of float64, relative to the layer's scale") {
  // {channels, size, m}: F(m x m, 3x3) as conv2d runs each layer at batch 1 (F(2x2) at 512@7,
  // conv2d_winograd_tile), and 512@7 by F(4x4) as well (its tiling at batch 2 and more).
  struct layer_case {
    std::int64_t channels, size, m;
  };
  for (const auto& layer : {layer_case{64, 56, 4}, {128, 28, 4}, {256, 14, 4}, {512, 7, 2}, {512, 7, 4}}) {
    const std::int64_t channels = layer.channels, size = layer.size;
    CAPTURE(channels);
    CAPTURE(layer.m);
    const kern::conv2d_geometry g{1, channels, size, size, channels, 3, 3, 1, 1, 1, 1};
    std::mt19937 gen(static_cast<unsigned>(channels));
    // Post-ReLU-like activations and He-scaled weights: the ranges a trained network sees.
    std::uniform_real_distribution<float> act(0.0f, 2.0f);
    std::normal_distribution<float> wd(0.0f, std::sqrt(2.0f / static_cast<float>(9 * channels)));
    std::vector<float> x(static_cast<std::size_t>(channels * size * size)), w(static_cast<std::size_t>(channels * channels * 9));
    for (float& v : x) v = act(gen);
    for (float& v : w) v = wd(gen);
    std::vector<float> out(static_cast<std::size_t>(channels * size * size));
    if (layer.m == kern::conv2d_winograd_tile(g)) {
      kern::conv2d(g, x.data(), w.data(), nullptr, out.data(), kern::conv2d_algorithm::winograd);
    } else {
      const kern::detail::winograd_tiling tl{1, size, size, 1, 1, size, size, layer.m};
      kern::detail::conv_winograd(tl, channels, channels, x.data(), {.weight = w.data()}, nullptr, out.data());
    }

    double max_error = 0, scale = 0;
    for (std::int64_t o = 0; o < channels; o += 13)
      for (std::int64_t oy = 0; oy < size; ++oy)
        for (std::int64_t ox = 0; ox < size; ++ox) {
          const double want = reference_output(g, x, w, o, oy, ox);
          const double got = out[static_cast<std::size_t>((o * size + oy) * size + ox)];
          max_error = std::max(max_error, std::abs(got - want));
          scale = std::max(scale, std::abs(want));
        }
    CAPTURE(max_error / scale);
    CHECK(max_error <= 1e-4 * scale);  // measured: 3.6e-6 to 5.3e-6 by F(4x4), 6.3e-7 by F(2x2)
  }
}

}  // namespace tmod_test_kernels_conv2d_winograd_resnet
