// BackwardFoldScale through the reductions: sum and mean commute with any scale, max and min only
// with a positive one, so a negative scale after a max stays a multiplication.
#include "passes_test.hpp"

namespace tmod_test_passes_reduce {

namespace {

using namespace passes_test;

const tmod::Tensor image = tmod::randn({2, 4, 6, 6}, 9);

/// conv -> (mean over H, W) + (max over W, summed over H) -> * scale.
struct Pooled : tmod::Module {
  tmod::Parameter w{tmod::randn({4, 4, 3, 3}, 31)};
  tmod::Parameter b{tmod::randn({4}, 32)};
  float scale;
  explicit Pooled(float s) : scale(s) {}
  TM_MODULE(Pooled, w, b)
  auto forward(const auto& x) const {
    const auto c = F::conv2d(x, w, b, {.padding = 1});
    return (F::mean(c, {2, 3}) + F::sum(F::max(c, {-1}), {2})) * scale;
  }
};

}  // namespace

TEST_CASE("BackwardFoldScale: a positive scale crosses sum, mean and max into the conv") {
  Pooled net(3.f);
  tmod::TracedModule m = tmod::trace_module(net, image);
  tmod::TracedModule opt = optimized_matches(m, {"BackwardFoldScale"}, image);
  CHECK(count(opt.graph(), "__mul__") == 0);
  CHECK(join(calls(opt.graph())) == "nn.conv2d math.max math.sum math.mean __add__");
}

TEST_CASE("BackwardFoldScale: a negative scale does not cross max") {
  Pooled net(-2.f);
  tmod::TracedModule m = tmod::trace_module(net, image);
  tmod::TracedModule opt = optimized_matches(m, {"BackwardFoldScale"}, image);
  CHECK(count(opt.graph(), "__mul__") == 1);
}

}  // namespace tmod_test_passes_reduce
