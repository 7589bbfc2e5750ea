// layer_norm and group_norm, as functions and as the LayerNorm and GroupNorm modules: traced,
// printed, run by the interpreter and by the typed graph, through save -> load, and with dynamic
// dims, each against the eager run; the modules' state_dict keys and shape errors.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include "serialize/round_trip.hpp"

#include <string>
#include <vector>

namespace tmod_test_serialize_layer_norm {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
using tmod::Tensor;

using serialize_test::round_trip;
using serialize_test::same_bits;
using serialize_test::output_dims;
using serialize_test::text;

/// (N, 4, 5, 6): the functions with and without affine operands, then the modules.
struct Norms : tmod::Module {
  tmod::Parameter w{tmod::uniform({5, 6}, 0.5f, 1.5f, 31)};
  tmod::Parameter b{tmod::uniform({5, 6}, -1.f, 1.f, 32)};
  tmod::Parameter gw{tmod::uniform({4}, 0.5f, 1.5f, 33)};
  M::LayerNorm ln{6};
  M::GroupNorm gn{2, 4, 1e-3};
  TM_MODULE(Norms, w, b, gw, ln, gn)
  auto forward(const auto& x) const {
    const auto a = F::layer_norm(x, {5, 6}, w, b);
    const auto c = F::group_norm(F::relu(a), 4, gw, tmod::none, 1e-4);
    const auto d = F::layer_norm(c - 0.5f, {6});
    return gn(ln(d + F::group_norm(x, 1)));
  }
};

const Tensor input = tmod::uniform({2, 4, 5, 6}, -2.f, 2.f, 41);

}  // namespace

TEST_CASE("trace: layer_norm and group_norm print as PyTorch's calls and run as traced, typed and loaded") {
  Norms net;
  net.ln.weight = tmod::uniform({6}, 0.5f, 1.5f, 34);
  const Tensor eager = net.forward(input);
  const tmod::TracedModule m = tmod::trace_module(net, input);
  const std::string printed = text(m);
  CAPTURE(printed);
  for (const char* call : {"nn.layer_norm(x, w, b, (5, 6), 1e-05, )", "nn.group_norm(relu_out, gw, None, 4, 0.0001, )",
                           "nn.group_norm(x, None, None, 1, 1e-05, )", "= ln(", "= gn("})
    CHECK_MESSAGE(printed.find(call) != std::string::npos, call);
  CHECK(same_bits(m(input).tensor(), eager));
  const tmod::TracedModule loaded = round_trip(m);
  CHECK(text(loaded) == printed);
  CHECK(same_bits(loaded(input).tensor(), eager));
  CHECK(same_bits(loaded.getattr("ln.weight").tensor(), net.ln.weight));

  const auto g = tmod::symbolic_trace(net, tmod::spec({2, 4, 5, 6}));
  CHECK(tmod::count_ops<F::layer_norm_fn>(g) == 2);
  CHECK(tmod::count_ops<F::group_norm_fn>(g) == 2);
  CHECK(tmod::count_ops<M::LayerNorm>(g) == 1);
  CHECK(same_bits(g(input), eager));
}

TEST_CASE("trace: layer_norm and group_norm with a dynamic batch and spatial dims") {
  Norms net;
  const tmod::TraceOptions dynamic{.dynamic_dims = {{0, "N"}, {2, "H"}}};
  const tmod::TracedModule m = round_trip(tmod::trace_module(net, input, dynamic));
  CHECK(output_dims(m) == "(N, 4, H, 6)");
  const Tensor x = tmod::uniform({3, 4, 5, 6}, -2.f, 2.f, 42);
  CHECK(same_bits(m(x).tensor(), net.forward(x)));
  // the normalised (5, 6) must stay (5, 6): H = 7 is a shape error at run time
  CHECK_THROWS_AS((void)m(tmod::zeros({1, 4, 7, 6})), tmod::shape_error);
}

TEST_CASE("nn: LayerNorm and GroupNorm have PyTorch's parameters, state_dict keys, configs and errors") {
  M::LayerNorm ln({3, 4}, 1e-6);
  CHECK(ln.weight.shape() == tmod::Shape{3, 4});
  std::vector<std::string> keys;
  for (const auto& [k, v] : ln.state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"weight", "bias"});
  CHECK(ln.config() == tmod::Value::dict({{"normalized_shape", tmod::Value::tuple({tmod::Value(std::int64_t{3}), tmod::Value(std::int64_t{4})})},
                                          {"eps", 1e-6},
                                          {"elementwise_affine", true}}));
  CHECK(M::LayerNorm::from_config(ln.config()).config() == ln.config());
  CHECK(M::LayerNorm({8}, 1e-5, false).state_dict().empty());
  CHECK(ln.repr().find("LayerNorm((3, 4), eps=1e-06, elementwise_affine=True)") != std::string::npos);
  const Tensor x = tmod::uniform({2, 3, 4}, -1.f, 1.f, 43);
  CHECK(same_bits(ln(x), F::layer_norm(x, {3, 4}, ln.weight, ln.bias, 1e-6)));
  CHECK_THROWS_WITH_AS(ln(tmod::zeros({2, 4, 3})), doctest::Contains("nn.layer_norm: normalized_shape (3, 4)"), tmod::shape_error);

  M::GroupNorm gn(3, 6);
  keys.clear();
  for (const auto& [k, v] : gn.state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"weight", "bias"});
  CHECK(gn.weight.shape() == tmod::Shape{6});
  CHECK(gn.config() == tmod::Value::dict({{"num_groups", std::int64_t{3}}, {"num_channels", std::int64_t{6}}, {"eps", 1e-5}, {"affine", true}}));
  CHECK(M::GroupNorm(2, 4, 1e-5, false).state_dict().empty());
  const Tensor y = tmod::uniform({2, 6, 3}, -1.f, 1.f, 44);
  CHECK(same_bits(gn(y), F::group_norm(y, 3, gn.weight, gn.bias)));
  CHECK_THROWS_WITH_AS(gn(tmod::zeros({2, 4, 3})), "GroupNorm: expected an input (N, 6, ...) for 3 groups of 6 channels, got (2, 4, 3)", tmod::shape_error);
  CHECK_THROWS_WITH_AS(M::GroupNorm(4, 6), doctest::Contains("GroupNorm: num_channels 6 must divide into num_groups 4"),
                       tmod::value_error);
  CHECK_THROWS_AS(M::GroupNorm::from_config(tmod::Value::dict({{"num_groups", std::int64_t{0}}, {"num_channels", std::int64_t{6}},
                                                               {"eps", 1e-5}, {"affine", true}})),
                  tmod::value_error);
}

}  // namespace tmod_test_serialize_layer_norm
