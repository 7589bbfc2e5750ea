// trace_module on a forward that loops over a ModuleList and reassigns its variables (models::Tower,
// which the compile-time tracer cannot capture): the graphs are written out by hand from the
// forward, and the traced module computes what eager mode computes, bit for bit.
#include <models/tower.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

namespace tmod_test_graph_tower {

namespace {
namespace tmod = tracemod;
}  // namespace

TEST_CASE("trace_module: a loop over a ModuleList with reassigned variables (models::Tower)") {
  tmod::manual_seed(7);
  models::Tower m(6, 4, 3, 2);
  const tmod::Tensor x = tmod::randn({2, 6}, 11);
  tmod::TracedModule traced = tmod::trace_module(m, x);
  const tmod::graph::Graph& g = traced.graph();
  CHECK(tmod::graph::to_string(g) ==
        "Tower.Graph (self, x) {\n"
        "\t%2:\tstem = getattr(self, \"stem\") -> (Linear)\n"
        "\t%3:\tstem_out = stem(x, )\n"
        "\t%4:\tblocks_0 = getattr(self, \"blocks.0\") -> (Module)\n"
        "\t%5:\tblocks_0_out = blocks_0(stem_out, )\n"
        "\t%13:\trelu_out = nn.relu(blocks_0_out, )\n"
        "\t%14:\tblocks_1 = getattr(self, \"blocks.1\") -> (Module)\n"
        "\t%15:\tblocks_1_out = blocks_1(relu_out, )\n"
        "\t%23:\trelu_out_1 = nn.relu(blocks_1_out, )\n"
        "\t%24:\tblocks_2 = getattr(self, \"blocks.2\") -> (Module)\n"
        "\t%25:\tblocks_2_out = blocks_2(relu_out_1, )\n"
        "\t%33:\trelu_out_2 = nn.relu(blocks_2_out, )\n"
        "\t%34:\thead = getattr(self, \"head\") -> (Linear)\n"
        "\t%35:\thead_out = head(relu_out_2, )\n"
        "\treturn head_out\n"
        "}");
  // Each block is its own module, so each has its own graph; the second one's ids follow its call.
  const auto& block1 = traced.getattr("blocks.1").as<tmod::TracedModule>();
  CHECK(tmod::graph::to_string(block1.graph()) ==
        "Tower_blocks_1.Graph (self, x) {\n"
        "\t%18:\tfc = getattr(self, \"fc\") -> (Linear)\n"
        "\t%19:\tfc_out = fc(x, )\n"
        "\t%20:\tgain = getattr(self, \"gain\") -> (Tensor)\n"
        "\t%21:\tmul_out = fc_out.__mul__(gain, )\n"
        "\t%22:\tadd_out = mul_out.__add__(x, )\n"
        "\treturn add_out\n"
        "}");
  CHECK(g.graphs(true).size() == 4);
  CHECK(traced.total_ids() == std::pair<std::int64_t, std::int64_t>{36, 36});
  tmod::check(g);

  const tmod::Tensor eager = m(x);
  const tmod::Tensor run = traced(x);
  REQUIRE(run.shape() == tmod::Shape{2, 2});
  CHECK(std::ranges::equal(run.values<float>(), eager.values<float>()));
  const tmod::Tensor other = tmod::randn({2, 6}, 12);
  CHECK(std::ranges::equal(traced(other).tensor().values<float>(), m(other).values<float>()));
}

}  // namespace tmod_test_graph_tower
