// Cost facts of calls (expr.cost(), traced.flops()): counts derived by hand from the operand shapes
// for conv, linear, matmul, pooling and an elementwise op, the same through builtin modules and user
// module calls, and ResNet-18's published multiply-adds.
#include "graph_test.hpp"

#include <models/resnet.hpp>

#include <cmath>
#include <cstdint>

namespace tmod_test_graph_cost {

using namespace graph_test;

namespace {

/// The cost of the single call of `g` to `target`.
tmod::functional::op_cost cost_of_call(const tmod::graph::Graph& g, std::string_view target) {
  const tmod::graph::Expr* found = nullptr;
  for (const auto& e : g.expr_list_())
    if (e->is_call() && e->target() == target) {
      REQUIRE(found == nullptr);
      found = e.get();
    }
  REQUIRE(found != nullptr);
  CHECK(found->flops() == found->cost().flops);
  CHECK(found->bytes() == found->cost().bytes_read + found->cost().bytes_written);
  return found->cost();
}

struct Ops : tmod::Module {
  tmod::Parameter w{tmod::randn({4, 3, 3, 3}, 1)};
  tmod::Parameter b{tmod::randn({4}, 2)};
  tmod::Parameter lw{tmod::randn({6, 8}, 3)};
  tmod::Parameter lb{tmod::randn({6}, 4)};
  tmod::Parameter mm{tmod::randn({4, 5}, 5)};
  TM_MODULE(Ops, w, b, lw, lb, mm)
  auto forward(const auto& x, const auto& v, const auto& m) const {
    auto c = F::conv2d(x, w, b, {.stride = 1, .padding = 1});
    auto p = F::max_pool2d(c, 3, {.stride = 2, .padding = 1});
    auto a = F::avg_pool2d(p, 2);
    auto r = F::relu(a);
    auto l = F::linear(v, lw, lb);
    auto q = F::matmul(m, mm);
    return std::tuple{r, l, q};
  }
};

}  // namespace

TEST_CASE("cost: conv2d, pooling, relu, linear and matmul count what hand derivation gives") {
  Ops ops;
  const tmod::TracedModule t =
      tmod::trace_module(ops, tmod::randn({2, 3, 10, 10}, 6), tmod::randn({5, 8}, 7), tmod::randn({2, 3, 4}, 8));
  const tmod::graph::Graph& g = t.graph();

  // conv: out (2, 4, 10, 10) = 800 elements, each 3 x 3 x 3 = 27 products, plus one bias add.
  const auto conv = cost_of_call(g, "nn.conv2d");
  CHECK(conv.macs == 800 * 27);
  CHECK(conv.flops == 800 * 27 + 800);
  CHECK(conv.bytes_read == (600 + 108 + 4) * 4);
  CHECK(conv.bytes_written == 800 * 4);

  // max pool 3x3 stride 2 pad 1 on 10x10: out 5x5, 2 x 4 x 25 = 200 outputs of 9 comparisons.
  const auto max_pool = cost_of_call(g, "nn.max_pool2d");
  CHECK(max_pool.macs == 0);
  CHECK(max_pool.flops == 200 * 9);
  CHECK(max_pool.bytes() == (800 + 200) * 4);

  // avg pool 2x2 on 5x5: out 2x2, 2 x 4 x 4 = 32 outputs of 4 adds.
  CHECK(cost_of_call(g, "nn.avg_pool2d").flops == 32 * 4);

  // relu: one operation per element, reads and writes 32 floats.
  const auto relu = cost_of_call(g, "nn.relu");
  CHECK(relu.flops == 32);
  CHECK(relu.bytes() == 2 * 32 * 4);

  // linear: (5, 8) x (6, 8)^T: 30 outputs of 8 products, plus the bias.
  const auto linear = cost_of_call(g, "nn.linear");
  CHECK(linear.macs == 30 * 8);
  CHECK(linear.flops == 30 * 8 + 30);

  // matmul: (2, 3, 4) @ (4, 5): 2 x 3 x 5 outputs of 4 products.
  const auto matmul = cost_of_call(g, "math.matmul");
  CHECK(matmul.macs == 2 * 3 * 5 * 4);
  CHECK(matmul.flops == matmul.macs);

  CHECK(t.macs() == conv.macs + linear.macs + matmul.macs);
  CHECK(t.flops() == conv.flops + 200 * 9 + 32 * 4 + 32 + linear.flops + matmul.flops);
}

TEST_CASE("cost: builtin module calls cost their functional equivalent; user module calls their graph") {
  Net net;
  net.eval();
  const tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 6, 6}, 9));
  // Block: conv 3->3 3x3 pad 1 with bias on 6x6 (108 outputs of 27 products + bias), eval bn (one
  // multiply-add per element), relu and +1 (one each).
  const std::int64_t conv_macs = 108 * 27;
  const std::int64_t block_flops = conv_macs + 108 + 108 + 108 + 108;
  const tmod::graph::Graph& top = t.graph();
  std::int64_t calls = 0;
  for (const auto& e : top.expr_list_())
    if (e->is_module_call()) {
      ++calls;
      CHECK(e->macs() == conv_macs);
      CHECK(e->flops() == block_flops);
    }
  CHECK(calls == 2);
  CHECK(t.macs() == 2 * conv_macs);
  CHECK(t.flops() == 2 * block_flops);
  // The conv call inside a block reads input, weight and bias and writes its output.
  const tmod::graph::Graph& block = t.getattr("block0").as<tmod::TracedModule>().graph();
  for (const auto& e : block.expr_list_())
    if (e->is_module_call() && e->inputs()[0]->name() == "conv")
      CHECK(e->bytes() == (108 + 81 + 3 + 108) * 4);
}

namespace {
struct FusedAdd : tmod::Module {
  M::Elemwise add_relu{"FUSE_ADD_RELU"};
  TM_MODULE(FusedAdd, add_relu)
  auto forward(const auto& x, const auto& y) const { return add_relu(x, y); }
};
}  // namespace

TEST_CASE("cost: a builtin Elemwise module counts its ops; the output shape comes from broadcasting") {
  FusedAdd m;
  const tmod::TracedModule t = tmod::trace_module(m, tmod::randn({2, 3}, 11), tmod::randn({3}, 12));
  // add then relu on 6 outputs; reads 6 + 3 floats, writes 6.
  CHECK(t.flops() == 12);
  CHECK(t.macs() == 0);
  CHECK(t.bytes() == (6 + 3 + 6) * 4);
}

TEST_CASE("cost: ResNet-18 at 224x224 does the published 1.82 G multiply-adds") {
  models::ResNet net = models::resnet18();
  net.eval();
  const tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 224, 224}, 10));
  // Convolutions 1,813,561,344 (summed per layer by hand) plus fc 512 x 1000.
  CHECK(t.macs() == 1'814'073'344);
  // Every other operation (bn, relu, pooling, adds, fc bias) adds well under 1 %.
  CHECK(t.flops() > t.macs());
  CHECK(std::abs(static_cast<double>(t.flops()) / 1.82e9 - 1.0) < 0.01);
}

}  // namespace tmod_test_graph_cost
