// Graph::to_dot / tmod::to_dot: the DOT text of a traced module with one user sub-module, checked
// against counts derived by hand from its two graphs (the rendering with graphviz is a docs step).
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace tmod_test_graph_dot {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

struct Block : tmod::Module {
  M::Linear fc{4, 4};
  TM_MODULE(Block, fc)
  auto forward(const auto& x) const { return F::relu(fc(x)); }
};

struct Net : tmod::Module {
  Block block;
  M::Linear head{4, 3};
  TM_MODULE(Net, block, head)
  auto forward(const auto& x) const {
    auto h = block(x);
    return head(h + 1);
  }
};

struct Twice : tmod::Module {
  Block block;
  TM_MODULE(Twice, block)
  auto forward(const auto& x) const { return block(block(x)); }
};

std::size_t count(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("to_dot: exprs are boxes, graphs nested clusters, edges carry shapes") {
  Net m;
  const tmod::TracedModule traced = tmod::trace_module(m, tmod::zeros({2, 4}));
  const std::string dot = traced.graph().to_dot();
  CHECK(dot == tmod::to_dot(traced.graph()));
  CHECK(dot.rfind("digraph \"Net\" {\n", 0) == 0);
  CHECK(dot.back() == '\n');
  // Net: self, x, 5 exprs (getattr block, block call, add, getattr head, head call), return;
  // Net_block: self, x, 3 exprs (getattr fc, fc call, relu), return.
  CHECK(count(dot, "subgraph cluster_") == 2);
  CHECK(count(dot, "label=\"Net.Graph\";") == 1);
  CHECK(count(dot, "label=\"Net_block.Graph\";") == 1);
  CHECK(count(dot, "shape=ellipse") == 6);
  CHECK(count(dot, "[label=\"%") == 12);
  CHECK(count(dot, "[label=\"return ") == 2);
  // Net: self->getattr block, getattr->call, x->Net_block's x, Net_block's return->call, call->add,
  // self->getattr head, getattr->call, add->call, call->return (9); Net_block: self->getattr fc,
  // getattr->call, x->call, call->relu, relu->return (5). Module values travel dashed (6).
  CHECK(count(dot, " -> g") == 14);  // labels hold " -> (Module)" too
  CHECK(count(dot, "[style=dashed]") == 6);
  CHECK(count(dot, "[label=\"(2, 4)\"]") == 7);
  CHECK(count(dot, "[label=\"(2, 3)\"]") == 1);
  // Labels are the printed exprs, tabs as spaces, quotes escaped; the callee cluster sits inside
  // the caller's, right after the call's box.
  CHECK(count(dot, "label=\"%3: block_out = block(x, )\"") == 1);
  CHECK(count(dot, "label=\"%7: fc_out = fc(x, )\"") == 1);
  CHECK(count(dot, "label=\"%2: block = getattr(self, \\\"block\\\") -> (Module)\"") == 1);
  CHECK(count(dot, "label=\"return head_out\"") == 1);
  const std::size_t call = dot.find("block_out = block(x, )");
  const std::size_t inner = dot.find("subgraph cluster_1 {");
  const std::size_t after = dot.find("%9: add_out");
  CHECK(call < inner);
  CHECK(inner < after);
  CHECK(dot.find("    subgraph cluster_1 {") != std::string::npos);
}

TEST_CASE("to_dot: a module called twice draws its graph at each call") {
  Twice m;
  const tmod::TracedModule traced = tmod::trace_module(m, tmod::zeros({2, 4}));
  const std::string dot = traced.graph().to_dot();
  CHECK(count(dot, "subgraph cluster_") == 3);
  CHECK(count(dot, "label=\"Twice_block.Graph\";") == 2);
  // Each drawing of the callee has its own ids.
  CHECK(count(dot, "g1_return [label=\"return relu_out\"") == 1);
  CHECK(count(dot, "g2_return [label=\"return relu_out\"") == 1);
}

}  // namespace tmod_test_graph_dot
