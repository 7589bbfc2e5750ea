// trace_module through containers and lists of values, as MegEngine's container tests do: a
// ModuleDict and a ModuleList of several module classes indexed and looped over in forward (getattr
// paths "blocks.key", one call per element), F::tensor_from_list / F::stack with traced items (one
// tensor.stack call), eager == traced == typed graph, and a missing key while tracing.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/module_dict.hpp>
#include <tracemod/nn/module_list.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace tmod_test_trace_containers {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

std::vector<float> floats(const tmod::Tensor& t) {
  const auto v = t.values<float>();
  return {v.begin(), v.end()};
}

bool same_values(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() && std::ranges::equal(a.values<float>(), b.values<float>());
}

struct Doubled : tmod::Module {
  M::Linear fc{6, 6};
  TM_MODULE(Doubled, fc)
  auto forward(const auto& x) const { return fc(x) * 2.f; }
};

struct Net : tmod::Module {
  M::ModuleDict<M::Linear, Doubled, M::ReLU> blocks{{"proj", M::Linear(4, 6)}, {"act", M::ReLU{}}, {"mix", Doubled{}}};
  M::ModuleList<Doubled, M::ReLU, M::Linear> layers{Doubled{}, M::ReLU{}, M::Linear(6, 3)};
  TM_MODULE(Net, blocks, layers)
  auto forward(const auto& x) const {
    auto y = blocks["proj"](x);
    for (const auto& [key, block] : blocks)
      if (key != "proj") y = block(y);
    for (const auto& layer : layers) y = layer(y);
    return y;
  }
};

/// A (1, 4) row scaled by the list [1, s, 2, 1] built from a traced 0-d value s and numbers.
struct Scale : tmod::Module {
  M::Linear fc{4, 1};
  TM_MODULE(Scale, fc)
  auto forward(const auto& x) const {
    auto s = F::reshape(fc(x), F::int_list{});
    return x * F::tensor_from_list(1, s, 2, 1);
  }
};

struct MissingKey : tmod::Module {
  M::ModuleDict<M::ReLU> acts{{"a", M::ReLU{}}};
  TM_MODULE(MissingKey, acts)
  auto forward(const auto& x) const { return acts["b"](x); }
};

}  // namespace

TEST_CASE("trace_module: a ModuleDict and a ModuleList of several classes, indexed and looped over") {
  tmod::manual_seed(8);
  Net m;
  const tmod::Tensor x = tmod::randn({2, 4}, 9);
  tmod::TracedModule traced = tmod::trace_module(m, x);
  // Written from forward: one getattr per element, on the dotted path of its key or index; the
  // sub-graph of a user module takes the ids after its call (its two Input exprs first).
  CHECK(tmod::graph::to_string(traced.graph()) ==
        "Net.Graph (self, x) {\n"
        "\t%2:\tblocks_proj = getattr(self, \"blocks.proj\") -> (Linear)\n"
        "\t%3:\tblocks_proj_out = blocks_proj(x, )\n"
        "\t%4:\tblocks_act = getattr(self, \"blocks.act\") -> (ReLU)\n"
        "\t%5:\tblocks_act_out = blocks_act(blocks_proj_out, )\n"
        "\t%6:\tblocks_mix = getattr(self, \"blocks.mix\") -> (Module)\n"
        "\t%7:\tblocks_mix_out = blocks_mix(blocks_act_out, )\n"
        "\t%13:\tlayers_0 = getattr(self, \"layers.0\") -> (Module)\n"
        "\t%14:\tlayers_0_out = layers_0(blocks_mix_out, )\n"
        "\t%20:\tlayers_1 = getattr(self, \"layers.1\") -> (ReLU)\n"
        "\t%21:\tlayers_1_out = layers_1(layers_0_out, )\n"
        "\t%22:\tlayers_2 = getattr(self, \"layers.2\") -> (Linear)\n"
        "\t%23:\tlayers_2_out = layers_2(layers_1_out, )\n"
        "\treturn layers_2_out\n"
        "}");
  CHECK(traced.getattr("blocks").module().type_name() == "ModuleDict");
  CHECK(traced.getattr("layers").module().type_name() == "ModuleList");
  const auto& mix = traced.getattr("blocks.mix").as<tmod::TracedModule>();
  CHECK(tmod::graph::to_string(mix.graph()) ==
        "Net_blocks_mix.Graph (self, x) {\n"
        "\t%10:\tfc = getattr(self, \"fc\") -> (Linear)\n"
        "\t%11:\tfc_out = fc(x, )\n"
        "\t%12:\tmul_out = fc_out.__mul__(2.0, )\n"
        "\treturn mul_out\n"
        "}");
  tmod::check(traced.graph());

  const tmod::Tensor eager = m(x);
  CHECK(same_values(traced(x).tensor(), eager));
  const tmod::Tensor other = tmod::randn({2, 4}, 10);
  CHECK(same_values(traced(other).tensor(), m(other)));
}

TEST_CASE("F::tensor_from_list: numbers and a traced 0-d value are one tensor.stack call") {
  tmod::manual_seed(3);
  Scale m;
  const tmod::Tensor x = tmod::tensor({{0.5f, -1.f, 2.f, 3.f}});
  // The reference, by hand: s = fc(x), y = x * [1, s, 2, 1].
  float s = m.fc.bias.data<float>()[0];
  for (int i = 0; i < 4; ++i) s += m.fc.weight.data<float>()[i] * x.data<float>()[i];
  const tmod::Tensor eager = m(x);
  REQUIRE(eager.shape() == tmod::Shape{1, 4});
  CHECK(floats(eager) == std::vector<float>{0.5f, -1.f * s, 4.f, 3.f});

  tmod::TracedModule traced = tmod::trace_module(m, x);
  // Equal numbers share one Constant; the list is one call.
  CHECK(tmod::graph::to_string(traced.graph()) ==
        "Scale.Graph (self, x) {\n"
        "\t%2:\tfc = getattr(self, \"fc\") -> (Linear)\n"
        "\t%3:\tfc_out = fc(x, )\n"
        "\t%4:\treshape_out = tensor.reshape(fc_out, (), )\n"
        "\t%5:\tconst_tensor = Constant(Tensor) -> (Tensor)\n"
        "\t%6:\tconst_tensor_1 = Constant(Tensor) -> (Tensor)\n"
        "\t%7:\tstack_out = tensor.stack([const_tensor, reshape_out, const_tensor_1, const_tensor], 0, )\n"
        "\t%8:\tmul_out = x.__mul__(stack_out, )\n"
        "\treturn mul_out\n"
        "}");
  CHECK(traced.graph().get_function_by_type(F::stack).as_count() == 1);
  CHECK(same_values(traced(x).tensor(), eager));
  const tmod::Tensor other = tmod::randn({1, 4}, 6);
  CHECK(same_values(traced(other).tensor(), m(other)));

  // The typed graph of the compile-time tracer computes the same.
  const auto g = tmod::symbolic_trace(m, tmod::spec({1, 4}));
  CHECK(tmod::count_ops<F::stack_fn>(g) == 1);
  CHECK(same_values(g(x), eager));
}

TEST_CASE("F::stack: a new axis; items of different shapes or no items are refused") {
  const tmod::Tensor a = tmod::tensor({{1.f, 2.f}, {3.f, 4.f}});
  const tmod::Tensor b = tmod::tensor({{5.f, 6.f}, {7.f, 8.f}});
  CHECK(floats(F::stack({a, b})) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  const tmod::Tensor mid = F::stack({a, b}, 1);
  CHECK(mid.shape() == tmod::Shape{2, 2, 2});
  CHECK(floats(mid) == std::vector<float>{1, 2, 5, 6, 3, 4, 7, 8});
  const tmod::Tensor last = F::stack({a, b}, -1);
  CHECK(last.shape() == tmod::Shape{2, 2, 2});
  CHECK(floats(last) == std::vector<float>{1, 5, 2, 6, 3, 7, 4, 8});
  CHECK_THROWS_WITH_AS((void)F::stack({a, tmod::zeros({2, 3})}),
                       "tensor.stack: input 1 has shape (2, 3) but input 0 has (2, 2); stacked tensors must have one shape",
                       tmod::shape_error);
  CHECK_THROWS_AS((void)F::stack({a, b}, 3), tmod::error);
  CHECK_THROWS_WITH_AS((void)F::stack(std::vector<tmod::Tensor>{}), "tensor.stack: needs at least one input",
                       tmod::value_error);
  // A list item that is not 0-d does not fit beside the numbers.
  CHECK_THROWS_AS((void)F::tensor_from_list(1, tmod::tensor({2.f})), tmod::shape_error);
  CHECK(floats(F::tensor_from_list(1, tmod::scalar_tensor(2.f), 3.5)) == std::vector<float>{1.f, 2.f, 3.5f});
}

TEST_CASE("trace_module: a missing ModuleDict key names the key, the dict's path and its keys") {
  MissingKey m;
  CHECK_THROWS_WITH_AS((void)tmod::trace_module(m, tmod::zeros({1, 2})),
                       "ModuleDict 'acts' in MissingKey has no key 'b' (its keys: 'a')", tmod::module_error);
}

}  // namespace tmod_test_trace_containers
