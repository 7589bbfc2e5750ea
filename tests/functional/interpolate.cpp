// interpolate against the PyTorch goldens (nearest and bilinear, align_corners true/false, sizes and
// scale factors up, down, non-integer and odd), a scalar reference loop of both rules, and its errors.
#include "functional/golden_case.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/interpolate.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tmod_test_functional_interpolate {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

TEST_CASE("functional: interpolate matches the goldens") {
  std::size_t nearest = 0, bilinear = 0, aligned = 0, scaled = 0;
  const std::size_t count = golden_case::for_each_case("interpolate", [&](const std::string& name, auto& args) {
    F::interpolate_params p;
    p.size = args.optional_pair("size");
    const double scale = args.real("scale_factor", 0.0);
    if (scale != 0.0) p.scale_factor = scale;
    p.mode = args.text("mode", "nearest");
    const bool align = args.flag("align_corners", false);
    if (p.mode == "bilinear" && name.find("align") != std::string::npos) p.align_corners = align;
    const auto in = golden_case::inputs(name, 1, 1);
    const Tensor expected = golden::load(name, "out");
    if (p.mode == "nearest") {
      ++nearest;
      golden::check_close(F::interpolate(in[0], p), expected, 0, 0, name);  // copies the same pixels: exact
    } else {
      ++bilinear;
      aligned += align ? 1 : 0;
      golden::check_close(F::interpolate(in[0], p), expected, 4e-7, 1e-6, name);  // a few ulps of |x| <= 4
    }
    scaled += p.scale_factor ? 1 : 0;
  });
  CHECK(count >= 26);
  CHECK(nearest >= 11);
  CHECK(bilinear >= 15);
  CHECK(aligned >= 5);
  CHECK(scaled >= 14);
}

/// PyTorch's rules written out in double on one axis: nearest's source index, bilinear's two
/// sources and the weight of the second.
std::int64_t nearest_ref(std::int64_t o, std::int64_t in, std::int64_t out) {
  return std::min<std::int64_t>(static_cast<std::int64_t>(std::floor(static_cast<double>(o) * in / out)), in - 1);
}
struct lin {
  std::int64_t i0, i1;
  double w1;
};
lin linear_ref(std::int64_t o, std::int64_t in, std::int64_t out, bool align) {
  double src = 0;
  if (align) src = out > 1 ? static_cast<double>(o) * (in - 1) / (out - 1) : 0.0;
  else src = std::max((o + 0.5) * in / out - 0.5, 0.0);
  const auto i0 = static_cast<std::int64_t>(src);
  return {i0, std::min(i0 + 1, in - 1), src - static_cast<double>(i0)};
}

TEST_CASE("functional: interpolate against a scalar loop of PyTorch's rules") {
  const Tensor x = tmod::uniform({2, 3, 6, 5}, -2.f, 2.f, 71);
  const auto xv = x.values<float>();
  const auto at = [&](std::int64_t p, std::int64_t i, std::int64_t j) { return static_cast<double>(xv[(p * 6 + i) * 5 + j]); };
  for (const F::pair2 size : {F::pair2{9, 7}, F::pair2{4, 3}, F::pair2{1, 1}, F::pair2{13, 2}}) {
    CAPTURE(size.h);
    CAPTURE(size.w);
    const Tensor n = F::interpolate(x, size);
    const Tensor b = F::interpolate(x, size, std::nullopt, "bilinear");
    const Tensor a = F::interpolate(x, size, std::nullopt, "bilinear", true);
    REQUIRE(n.shape() == Shape{2, 3, size.h, size.w});
    const auto nv = n.values<float>();
    const auto bv = b.values<float>();
    const auto av = a.values<float>();
    for (std::int64_t p = 0; p < 6; ++p)
      for (std::int64_t i = 0; i < size.h; ++i)
        for (std::int64_t j = 0; j < size.w; ++j) {
          const auto k = static_cast<std::size_t>((p * size.h + i) * size.w + j);
          CHECK(nv[k] == static_cast<float>(at(p, nearest_ref(i, 6, size.h), nearest_ref(j, 5, size.w))));
          for (const bool align : {false, true}) {
            const lin r = linear_ref(i, 6, size.h, align), c = linear_ref(j, 5, size.w, align);
            const double want = (1 - r.w1) * ((1 - c.w1) * at(p, r.i0, c.i0) + c.w1 * at(p, r.i0, c.i1)) +
                                r.w1 * ((1 - c.w1) * at(p, r.i1, c.i0) + c.w1 * at(p, r.i1, c.i1));
            CHECK(std::abs((align ? av[k] : bv[k]) - want) <= 2e-6);
          }
        }
  }
  // scale_factor sizes the output as floor(in * scale)
  CHECK(F::interpolate(x, std::nullopt, 1.5).shape() == Shape{2, 3, 9, 7});
  CHECK(F::interpolate(x, std::nullopt, 0.5, "bilinear").shape() == Shape{2, 3, 3, 2});
}

TEST_CASE("functional: interpolate refuses bad arguments, naming the op and the shapes") {
  const Tensor x = tmod::zeros({1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(F::interpolate(tmod::zeros({2, 3, 4}), F::pair2{2, 2}),
                       doctest::Contains("nn.interpolate: the input must be NCHW (rank 4), got shape (2, 3, 4)"),
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::pair2{2, 2}, 2.0), doctest::Contains("give exactly one of size and scale_factor"),
                       tmod::value_error);
  CHECK_THROWS_WITH_AS(F::interpolate(x), doctest::Contains("input of shape (1, 2, 3, 4)"), tmod::value_error);
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::pair2{0, 2}), doctest::Contains("size (0, 2) must be positive"), tmod::value_error);
  CHECK_THROWS_WITH_AS(F::interpolate(x, std::nullopt, -1.0), doctest::Contains("scale_factor -1.0 must be"), tmod::value_error);
  CHECK_THROWS_WITH_AS(F::interpolate(x, std::nullopt, 0.2), doctest::Contains("resized to (0, 0) has an empty axis"),
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS(F::interpolate(x, 2, std::nullopt, "nearest", true),
                       doctest::Contains("align_corners only applies to mode 'bilinear'"), tmod::value_error);
  CHECK_THROWS_WITH_AS(F::interpolate(x, 2, std::nullopt, "bicubic"), doctest::Contains("mode is 'bicubic'"), tmod::value_error);
  CHECK_THROWS_AS(F::interpolate(tmod::zeros({1, 2, 3, 4}, tmod::int32), 2), tmod::dtype_error);
  CHECK_NOTHROW(F::interpolate(x, 2, std::nullopt, "bilinear", false));
}

}  // namespace

}  // namespace tmod_test_functional_interpolate
