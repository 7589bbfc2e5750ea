// scaled_dot_product_attention traced, printed, run by the interpreter and by the typed graph,
// through save -> load, with a dynamic batch and sequence length, each against the eager run.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include "serialize/round_trip.hpp"

#include <string>

namespace tmod_test_serialize_attention {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Tensor;

using serialize_test::round_trip;
using serialize_test::same_bits;
using serialize_test::text;

/// x (N, L, 8): self-attention with a mask parameter over the heads, then causal with a scale, over
/// (N, 2, L, 4) heads.
struct Attend : tmod::Module {
  tmod::Parameter mask{tmod::uniform({6, 6}, -1.f, 1.f, 51)};
  tmod::Parameter wk{tmod::uniform({8}, 0.5f, 1.5f, 52)};
  TM_MODULE(Attend, mask, wk)
  auto forward(const auto& x) const {
    const auto a = F::scaled_dot_product_attention(x, x * wk, F::relu(x), mask);
    const auto h = F::transpose(F::reshape(a, {-1, 6, 2, 4}), {0, 2, 1, 3});
    const auto c = F::scaled_dot_product_attention(h, h, h - 0.25f, tmod::none, true, 0.3);
    return F::flatten(F::transpose(c, {0, 2, 1, 3}), 2);
  }
};

const Tensor input = tmod::uniform({2, 6, 8}, -2.f, 2.f, 61);

}  // namespace

TEST_CASE("trace: scaled_dot_product_attention prints as PyTorch's call and runs as traced, typed and loaded") {
  Attend net;
  const Tensor eager = net.forward(input);
  const tmod::TracedModule m = tmod::trace_module(net, input);
  const std::string printed = text(m);
  CAPTURE(printed);
  for (const char* call : {"nn.scaled_dot_product_attention(x, mul_out, relu_out, mask, False, None, )",
                           ", None, True, 0.3, )"})
    CHECK_MESSAGE(printed.find(call) != std::string::npos, call);
  CHECK(same_bits(m(input).tensor(), eager));
  const tmod::TracedModule loaded = round_trip(m);
  CHECK(text(loaded) == printed);
  CHECK(same_bits(loaded(input).tensor(), eager));

  const auto g = tmod::symbolic_trace(net, tmod::spec({2, 6, 8}));
  // the typed graph is an expression tree: the first call counts once in each of h's three uses
  CHECK(tmod::count_ops<F::scaled_dot_product_attention_fn>(g) == 1 + 3);
  CHECK(same_bits(g(input), eager));
}

TEST_CASE("trace: scaled_dot_product_attention with a dynamic batch") {
  Attend net;
  const tmod::TracedModule m = round_trip(tmod::trace_module(net, input, tmod::TraceOptions{.dynamic_dims = {{0, "N"}}}));
  CHECK(static_cast<const tmod::graph::TensorNode*>(m.graph().outputs()[0])->shape_text() == "(N, 6, 8)");
  const Tensor x = tmod::uniform({3, 6, 8}, -2.f, 2.f, 62);
  CHECK(same_bits(m(x).tensor(), net.forward(x)));
}

}  // namespace tmod_test_serialize_attention
