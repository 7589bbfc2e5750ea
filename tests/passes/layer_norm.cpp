// FuseLayerNorm: a layer norm written out (mean, subtract, square, mean, add eps, sqrt, divide, then
// an optional weight and bias) becomes one nn.layer_norm call, in method and function spellings and
// both operand orders, over one or several trailing axes; and it is left alone where fusing would
// change what the graph computes or remove a value something else reads.
#include "passes_test.hpp"

namespace tmod_test_passes_layer_norm {

namespace {

using namespace passes_test;

const tmod::Tensor tokens = tmod::uniform({2, 3, 4, 8}, -2.f, 3.f, 41);

/// The normalisation as a transformer block writes it by hand: tensor methods, d * d, weight then bias.
struct Methods : tmod::Module {
  tmod::Parameter w{tmod::uniform({8}, 0.5f, 1.5f, 42)};
  tmod::Parameter b{tmod::uniform({8}, -1.f, 1.f, 43)};
  TM_MODULE(Methods, w, b)
  auto forward(const auto& x) const {
    const auto d = x - F::mean(x, {-1}, true);
    const auto var = F::mean(d * d, {-1}, true);
    return d / F::sqrt(var + 1e-5f) * w + b;
  }
};

/// The same through functions with the constants and the affine operands on the left, squared by pow,
/// over the last two axes (given as non-negative axes).
struct Functions : tmod::Module {
  tmod::Parameter w{tmod::uniform({4, 8}, 0.5f, 1.5f, 44)};
  tmod::Parameter b{tmod::uniform({4, 8}, -1.f, 1.f, 45)};
  TM_MODULE(Functions, w, b)
  auto forward(const auto& x) const {
    const auto d = F::sub(x, F::mean(x, {2, 3}, true));
    const auto var = F::mean(F::pow(d, 2.f), {3, 2}, true);
    return F::add(b, F::mul(w, F::div(d, F::sqrt(F::add(1e-3f, var)))));
  }
};

/// No weight and no bias; F::square.
struct Plain : tmod::Module {
  TM_MODULE(Plain)
  auto forward(const auto& x) const {
    const auto d = x - F::mean(x, {-1}, true);
    return d / F::sqrt(F::mean(F::square(d), {-1}, true) + 0.25f);
  }
};

/// What must stay written out: `leak` reads the centred values as well, `axis` normalises a middle
/// axis, `broadcast` has a weight of shape (1, 8) (broadcast, not the normalised shape).
struct Blocked : tmod::Module {
  tmod::Parameter w{tmod::uniform({8}, 0.5f, 1.5f, 46)};
  tmod::Parameter wide{tmod::uniform({1, 8}, 0.5f, 1.5f, 47)};
  std::string kind;
  explicit Blocked(std::string k) : kind(std::move(k)) {}
  TM_MODULE(Blocked, w, wide)
  auto forward(const auto& x) const {
    const std::int64_t axis = kind == "axis" ? 2 : -1;
    const auto d = x - F::mean(x, {axis}, true);
    const auto y = d / F::sqrt(F::mean(d * d, {axis}, true) + 1e-5f);
    if (kind == "leak") return y * w + d;
    if (kind == "broadcast") return y * wide;
    return y;
  }
};

/// FuseLayerNorm leaves one nn.layer_norm call that computes `reference` (F::layer_norm, eager).
void check_fused(tmod::TracedModule m, const tmod::Tensor& reference) {
  tmod::TracedModule opt = optimized_matches(m, {"FuseLayerNorm"}, tokens);
  CHECK(join(calls(opt.graph())) == "nn.layer_norm");
  CHECK(rel_diff(opt(tokens).tensor(), reference) < 1e-6);
}

}  // namespace

TEST_CASE("FuseLayerNorm: a written-out layer norm with weight and bias becomes nn.layer_norm") {
  Methods net;
  tmod::TracedModule m = tmod::trace_module(net, tokens);
  REQUIRE(count(m.graph(), "math.mean") == 2);
  check_fused(m, F::layer_norm(tokens, {8}, net.w, net.b, 1e-5));
}

TEST_CASE("FuseLayerNorm: function spellings, operands on the left, pow, two trailing axes") {
  Functions net;
  check_fused(tmod::trace_module(net, tokens), F::layer_norm(tokens, {4, 8}, net.w, net.b, 1e-3));
}

TEST_CASE("FuseLayerNorm: without weight and bias, and among all the builtin passes") {
  Plain net;
  tmod::TracedModule m = tmod::trace_module(net, tokens);
  check_fused(m, F::layer_norm(tokens, {8}, tmod::none, tmod::none, 0.25));
  // NormElemWise would turn d = x - mean into x + (-mean); FuseLayerNorm runs before it.
  const std::vector<std::string> builtins{"AttrToConstant", "FoldConstant",      "NormElemWise",     "FuseConvBn",
                                          "FuseAddMul",     "BackwardFoldScale", "FuseConvEpilogue", "FuseElemwise",
                                          "FuseLayerNorm"};
  tmod::TracedModule all = optimized_matches(m, builtins, tokens);
  CHECK(count(all.graph(), "nn.layer_norm") == 1);
}

TEST_CASE("FuseLayerNorm: a value read elsewhere, a middle axis or a broadcast weight stays written out") {
  for (const char* kind : {"leak", "axis", "broadcast"}) {
    CAPTURE(kind);
    Blocked net(kind);
    tmod::TracedModule m = tmod::trace_module(net, tokens);
    tmod::TracedModule opt = optimized_matches(m, {"FuseLayerNorm"}, tokens);
    if (std::string(kind) == "broadcast") {
      // the normalisation itself is fused; the (1, 8) weight stays a multiplication after it
      CHECK(join(calls(opt.graph())) == "nn.layer_norm __mul__");
    } else {
      CHECK(count(opt.graph(), "nn.layer_norm") == 0);
      CHECK(count(opt.graph(), "math.mean") == 2);
    }
  }
}

}  // namespace tmod_test_passes_layer_norm
