// The activations traced (function calls and modules), printed, run by the interpreter and by the
// typed graph, fused by FuseElemwise (all but gelu, whose params a fused program cannot carry), and
// through save -> load, each against the eager run.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include "serialize/round_trip.hpp"

#include <cstring>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace tmod_test_serialize_activations {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
using tmod::Tensor;

using serialize_test::round_trip;
using serialize_test::same_bits;
using serialize_test::text;

/// Function calls of every activation, the fusable ones chained (no product feeds an addition, so
/// fused and unfused evaluation give the same bits).
struct Funcs : tmod::Module {
  TM_MODULE(Funcs)
  auto forward(const auto& x) const {
    const auto chain = F::leaky_relu(F::hardswish(F::silu(x) * 0.5f), 0.2) + F::hardsigmoid(x);
    return F::gelu(chain, {.approximate = "tanh"}) + F::gelu(x);
  }
};

/// The same activations as modules.
struct Mods : tmod::Module {
  M::GELU gelu{"tanh"};
  M::SiLU silu;
  M::Hardswish hardswish;
  M::Hardsigmoid hardsigmoid;
  M::LeakyReLU leaky{0.125};
  TM_MODULE(Mods, gelu, silu, hardswish, hardsigmoid, leaky)
  auto forward(const auto& x) const { return gelu(leaky(hardswish(silu(x)))) + hardsigmoid(x); }
};

const Tensor input = tmod::uniform({2, 3, 37}, -5.f, 5.f, 31);

}  // namespace

TEST_CASE("trace: the activations print as PyTorch's calls and run as traced, fused and loaded") {
  Funcs net;
  const Tensor eager = net.forward(input);
  const tmod::TracedModule m = tmod::trace_module(net, input);
  const std::string printed = text(m);
  CAPTURE(printed);
  for (const char* call : {"nn.silu(", "nn.hardswish(", "nn.leaky_relu(", ", 0.2, )", "nn.hardsigmoid(", "nn.gelu(",
                           "approximate=tanh"})
    CHECK_MESSAGE(printed.find(call) != std::string::npos, call);
  CHECK(same_bits(m(input).tensor(), eager));

  const tmod::TracedModule fused = tmod::optimize(m, {"FuseElemwise"});
  const std::string fused_text = text(fused);
  CAPTURE(fused_text);
  CHECK(fused_text.find("elemwise.fused[leaky_relu(hardswish(silu(x0) * 0.5), 0.2) + hardsigmoid(x0)](x, )") !=
        std::string::npos);
  CHECK(fused_text.find("nn.gelu(") != std::string::npos);
  CHECK(same_bits(fused(input).tensor(), eager));

  for (const tmod::TracedModule& loaded : {round_trip(m), round_trip(fused)}) CHECK(same_bits(loaded(input).tensor(), eager));
  CHECK(text(round_trip(m)) == printed);

  // The typed graph of the compile-time tracer (fused evaluation of the elementwise chain).
  const auto g = tmod::symbolic_trace(net, tmod::spec({2, 3, 37}));
  CHECK(tmod::count_ops<F::gelu_fn>(g) == 2);
  CHECK(same_bits(g(input), eager));
}

TEST_CASE("trace: the activation modules keep their config through save -> load") {
  Mods net;
  const Tensor eager = net.forward(input);
  const tmod::TracedModule m = tmod::trace_module(net, input);
  CHECK(same_bits(m(input).tensor(), eager));
  const tmod::TracedModule loaded = round_trip(m);
  CHECK(same_bits(loaded(input).tensor(), eager));
  CHECK(text(loaded) == text(m));
  const auto g = tmod::symbolic_trace(net, tmod::spec({2, 3, 37}));
  CHECK(tmod::count_ops<M::LeakyReLU>(g) == 1);
  CHECK(same_bits(g(input), eager));
}

}  // namespace tmod_test_serialize_activations
