// Queries, filters, users/producers, flatten, watch and end points, one graph per call signature
// (MegEngine's TracedModule tests on its block/net fixtures).
#include "graph_test.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace tmod_test_graph_queries {

using namespace graph_test;

namespace {

tmod::TracedModule traced_net(Net& net, const tmod::Tensor& x) {
  net.eval();
  return tmod::trace_module(net, x);
}

/// relu(relu(relu(relu(x)))), reassigning one variable.
struct Chain : tmod::Module {
  TM_MODULE(Chain)
  auto forward(const auto& x) const {
    auto y = F::relu(x);
    y = F::relu(y);
    y = F::relu(y);
    return F::relu(y);
  }
};

/// Every node's users are exactly the exprs that list it as an input, in every graph.
void check_users(const tmod::graph::Graph& top) {
  for (const tmod::graph::Graph* g : top.graphs()) {
    std::map<const tmod::graph::Node*, std::vector<const tmod::graph::Expr*>> uses;
    for (const tmod::graph::Expr* e : g->exprs(false))
      for (const tmod::graph::Node* in : e->inputs()) uses[in].push_back(e);
    for (const tmod::graph::Node* n : g->nodes(false)) {
      CHECK(n->top_graph() == g);
      CHECK(n->expr() != nullptr);
      const auto outs = n->expr()->outputs();
      CHECK(std::find(outs.begin(), outs.end(), n) != outs.end());
      std::vector<const tmod::graph::Expr*> users(n->users().begin(), n->users().end());
      CHECK(users == uses[n]);
    }
  }
}

}  // namespace

TEST_CASE("queries by function, module, method, id and name") {
  Net net;
  const tmod::Tensor x = tmod::randn({1, 3, 6, 6});
  tmod::TracedModule t = traced_net(net, x);
  const tmod::graph::Graph& g = t.graph();

  CHECK(g.get_function_by_type(F::relu).as_count() == 2);
  CHECK(g.get_function_by_type(F::relu, false).as_count() == 0);
  CHECK(g.get_function_by_type("nn.relu").as_count() == 2);
  CHECK(g.get_method_by_type("__add__").as_count() == 2);
  CHECK(g.get_method_by_type("__call__").as_count() == 8);  // 2 blocks + per block conv, bn, id
  CHECK(g.get_method_by_type("__call__", false).as_count() == 2);
  CHECK(g.get_module_by_type<M::Conv2d>().as_count() == 2);
  CHECK(g.get_module_by_type<M::BatchNorm2d>(false).as_count() == 0);
  // getattr block0, block1 and the two ids, plus the `self` of each of the five graphs.
  CHECK(g.get_module_by_type<tmod::TracedModule>().as_count() == 4 + 5);

  const tmod::graph::Expr* relu = g.get_function_by_type(F::relu).as_list().front();
  CHECK(relu->top_graph()->name() == "Net_block0");
  CHECK(g.get_expr_by_id(relu->id()).as_unique() == relu);
  CHECK(g.get_node_by_id(relu->output()->id()).as_unique() == relu->output());
  const auto by_ids = g.get_node_by_id(std::vector<std::int64_t>{0, 1, relu->output()->id()}).as_dict();
  CHECK(by_ids.size() == 3);
  CHECK(by_ids.begin()->second->name() == "self");

  // Names match "<graph name>_<node name>" or the node name, by glob, case-insensitively by default.
  CHECK(g.get_node_by_name("Net_block0_relu_out").as_unique() == relu->output());
  CHECK(g.get_node_by_name("*RELU_OUT").as_count() == 2);
  CHECK(g.get_node_by_name("*RELU_OUT", false).as_count() == 0);
  CHECK(g.get_node_by_name("Net_block?_conv").as_count() == 2);

  // Chained filters.
  CHECK(g.exprs().call_method("__call__").where([](const tmod::graph::Expr* e) { return e->graph() != nullptr; }).as_count() == 4);
  check_users(g);
  tmod::check(g);
}

TEST_CASE("flatten: 12 exprs, equal output, idempotent, contiguous ids, same state_dict") {
  Net net;
  const tmod::Tensor x = tmod::randn({1, 3, 6, 6});
  tmod::TracedModule t = traced_net(net, x);
  tmod::TracedModule flat = t.flatten();
  const tmod::graph::Graph& g = flat.graph();
  CHECK(g.exprs(false).of_kind(tmod::graph::ExprKind::input).as_count() == 2);
  CHECK(g.expr_list_().size() == 12);
  CHECK(g.get_method_by_type("__call__").as_count() == 4);  // two convs, two bns
  const std::string expected =
      "Net.Graph (self, x) {\n"
      "\t%2:\tblock0_conv = getattr(self, \"block0.conv\") -> (Conv2d)\n"
      "\t%3:\tblock0_conv_out = block0_conv(x, )\n"
      "\t%4:\tblock0_bn = getattr(self, \"block0.bn\") -> (BatchNorm2d)\n"
      "\t%5:\tblock0_bn_out = block0_bn(block0_conv_out, )\n"
      "\t%6:\tblock0_relu_out = nn.relu(block0_bn_out, )\n"
      "\t%7:\tblock0_add_out = block0_relu_out.__add__(1, )\n"
      "\t%8:\tblock1_conv = getattr(self, \"block1.conv\") -> (Conv2d)\n"
      "\t%9:\tblock1_conv_out = block1_conv(block0_add_out, )\n"
      "\t%10:\tblock1_bn = getattr(self, \"block1.bn\") -> (BatchNorm2d)\n"
      "\t%11:\tblock1_bn_out = block1_bn(block1_conv_out, )\n"
      "\t%12:\tblock1_relu_out = nn.relu(block1_bn_out, )\n"
      "\t%13:\tblock1_add_out = block1_relu_out.__add__(1, )\n"
      "\treturn block1_add_out\n"
      "}";
  CHECK(text(g) == expected);
  check_identical(flat(x), net(x));
  check_identical(flat(x), t(x));
  tmod::TracedModule again = flat.flatten();
  CHECK(text(again.graph()) == expected);
  const auto nodes = g.nodes().as_list();
  for (std::size_t i = 0; i < nodes.size(); ++i) CHECK(nodes[i]->id() == static_cast<std::int64_t>(i));
  std::vector<std::string> k1, k2;
  for (const auto& [k, v] : t.state_dict()) k1.push_back(k);
  for (const auto& [k, v] : flat.state_dict()) k2.push_back(k);
  std::vector<std::string> k0;
  for (const auto& [k, v] : net.state_dict()) k0.push_back(k);
  CHECK(k1 == k0);
  CHECK(k2 == k0);
  check_users(g);
  tmod::check(g);
  tmod::check(t.graph());  // the original is untouched
  CHECK(t.graph().get_method_by_type("__call__").as_count() == 8);
}

TEST_CASE("watch points and end points on x + 1 + 2 (MegEngine's docstring)") {
  AddTwice m;
  tmod::TracedModule t = tmod::trace_module(m, tmod::zeros({1}));
  tmod::graph::Node* add_out = t.graph().get_node_by_id(2).as_unique();
  CHECK(add_out->name() == "add_out");

  t.set_watch_points({add_out});
  tmod::Tensor y = t(tmod::zeros({1}));
  CHECK(y.item() == 3.f);
  REQUIRE(t.watch_node_value().size() == 1);
  CHECK(t.watch_node_value().at(add_out).tensor().item() == 1.f);
  (void)t(tmod::tensor({5.f}));
  CHECK(t.watch_node_value().at(add_out).tensor().item() == 6.f);  // a new run overwrites
  t.clear_watch_points();
  CHECK(t.watch_node_value().empty());

  t.set_end_points({add_out});
  const tmod::Value ends = t(tmod::zeros({1}));
  REQUIRE(ends.kind() == tmod::Value::Kind::tuple);
  REQUIRE(ends.size() == 1);
  CHECK(ends[0].tensor().item() == 1.f);
  // A graph input can be an end point too.
  t.set_end_points({t.graph().inputs()[1], add_out});
  const tmod::Value both = t(tmod::tensor({2.f}));
  CHECK(both[0].tensor().item() == 2.f);
  CHECK(both[1].tensor().item() == 3.f);
  t.clear_end_points();
  CHECK(tmod::Tensor(t(tmod::zeros({1}))).item() == 3.f);
}

TEST_CASE("a module called with different non-tensor arguments has one graph per call") {
  CallsTwice m;
  tmod::TracedModule t = tmod::trace_module(m, tmod::zeros({2}));
  const auto calls = t.graph().get_method_by_type("__call__", false).as_list();
  REQUIRE(calls.size() == 2);
  CHECK(tmod::graph::to_string(*calls[0]) == "%3:\tmod_out = mod(x, 1, )");
  CHECK(tmod::graph::to_string(*calls[1]) == "%7:\tmod_out_1 = mod(mod_out, 2, )");
  CHECK(text(*calls[0]->graph()) == "CallsTwice_mod.Graph (self, x) {\n\t%6:\tadd_out = x.__add__(1, )\n\treturn add_out\n}");
  CHECK(text(*calls[1]->graph()) == "CallsTwice_mod_1.Graph (self, x) {\n\t%10:\tadd_out = x.__add__(2, )\n\treturn add_out\n}");
  CHECK(calls[0]->call_signature() == "(Tensor, 1)");
  tmod::TracedModule& mod = sub(t, "mod");
  CHECK(mod.graphs().size() == 2);
  try {
    (void)mod.graph();
    FAIL("graph() on a module with two graphs must throw");
  } catch (const tmod::graph_error& e) {
    const std::string what = e.what();
    CHECK(what.find("forward(Tensor, 1)") != std::string::npos);
    CHECK(what.find("forward(Tensor, 2)") != std::string::npos);
  }
  CHECK(tmod::Tensor(t(tmod::ones({2}))).at({0}) == 4.f);
  tmod::check(t.graph());
}

TEST_CASE("nested outputs come back as tuples; traced equals eager bit for bit") {
  TwoOutputs m;
  const tmod::Tensor x = tmod::randn({3, 4});
  tmod::TracedModule t = tmod::trace_module(m, x);
  const tmod::Value out = t(x);
  REQUIRE(out.kind() == tmod::Value::Kind::tuple);
  const auto [a, b] = m(x);
  check_identical(out[0].tensor(), a);
  check_identical(out[1].tensor(), b);

  SimpleModule s;
  const tmod::Tensor xs = tmod::randn({3, 4});
  tmod::TracedModule ts = tmod::trace_module(s, xs);
  check_identical(ts(xs), s(xs));
  // The traced module outlives the original (its module tree is its own).
  tmod::TracedModule copy = [&] {
    SimpleModule local;
    local.param = tmod::Parameter(tmod::tensor({3.f}));
    return tmod::trace_module(local, xs);
  }();
  CHECK(tmod::Tensor(copy(xs)).defined());
}

TEST_CASE("Expr::interpret runs one expr on given values; the interpreter frees values after their last use") {
  AddTwice m;
  tmod::TracedModule t = tmod::trace_module(m, tmod::zeros({1}));
  const tmod::graph::Expr* add = t.graph().get_method_by_type("__add__").as_list().front();
  const std::vector<tmod::graph::NodeValue> in{tmod::Value(tmod::tensor({4.f}))};
  const auto out = add->interpret(in);
  REQUIRE(out.size() == 1);
  CHECK(std::get<tmod::Value>(out[0]).tensor().item() == 5.f);

  // relu(relu(relu(relu(x)))): at most an input and an output are alive at once.
  Chain chain;
  const tmod::Tensor x = tmod::randn({256, 1024});
  tmod::TracedModule tc = tmod::trace_module(chain, x);
  check_identical(tc(x), chain(x));
  CHECK(tc.graph().peak_live_bytes() == 2 * x.nbytes());
}

}  // namespace tmod_test_graph_queries
