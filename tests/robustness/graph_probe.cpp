// Probes of the runtime graph's public surgery and query entry points fed a wrong count, shape,
// dtype, null, dangling or duplicate name or id: each must throw one clear tmod::error naming what is
// wrong, and leave the traced module exactly as it was (every graph's printed text, with ids, and
// every tensor compared before and after the failing call).
#include "robustness/probe.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tmod_test_robustness_graph_probe {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
namespace G = tracemod::graph;
using probe::expect_error;

/// conv -> relu -> +1 in a user module; two of them with a relu between.
struct Block : tmod::Module {
  M::Conv2d conv{2, 2, 3, {.padding = 1}};
  TM_MODULE(Block, conv)
  auto forward(const auto& x) const { return F::relu(conv(x)) + 1; }
};
struct Net : tmod::Module {
  Block b0;
  Block b1;
  TM_MODULE(Net, b0, b1)
  auto forward(const auto& x) const { return b1(F::relu(b0(x))); }
};

/// A traced Net, and everything observable about it.
struct Traced {
  Net net;
  tmod::Tensor x = tmod::randn({1, 2, 4, 4}, 5);
  tmod::TracedModule t = tmod::trace_module(net, x);

  [[nodiscard]] G::Graph& top() const { return t.graph(); }
  [[nodiscard]] G::Graph& b0() { return t.getattr("b0").as<tmod::TracedModule>().graph(); }
  [[nodiscard]] std::string text() const {
    std::string s;
    for (const G::Graph* g : t.graph().graphs(true)) s += tmod::format_ids(*g) + "\n";
    return s;
  }
};

/// `call` throws E naming `needles`, and the traced module's graphs and tensors are unchanged.
template <class E, class Call>
void expect_unchanged(std::string_view what, Traced& f, Call&& call, std::initializer_list<std::string_view> needles) {
  CAPTURE(what);
  const std::string before = f.text();
  const probe::module_state state = probe::module_state::of(f.t);
  expect_error<E>(what, call, needles);
  CHECK_MESSAGE(f.text() == before, "the failing call changed a graph");
  CHECK_MESSAGE(probe::module_state::of(f.t) == state, "the failing call changed a tensor");
  tmod::check(f.top());
}

}  // namespace

TEST_CASE("graph probe: insert_exprs with a foreign anchor, a foreign node, a second scope on one graph") {
  Traced f;
  Traced other;
  G::Graph& g = f.top();
  expect_unchanged<tmod::graph_error>("anchor of another graph", f, [&] { (void)g.insert_exprs(f.b0().outputs().front()->expr()); },
                                      {"insert_exprs", "is not an expr of Net.Graph"});
  expect_unchanged<tmod::graph_error>("node of another module", f, [&] {
    auto scope = g.insert_exprs();
    (void)F::neg(tmod::Sym(other.top().outputs().front()));
  }, {"belongs to", "Net.Graph"});
  expect_unchanged<tmod::graph_error>("second scope on one graph", f, [&] {
    auto scope = g.insert_exprs();
    (void)F::neg(tmod::Sym(g.outputs().front()));
    auto again = g.insert_exprs();
  }, {"Net.Graph is already recording"});
  expect_unchanged<tmod::graph_error>("empty Sym", f, [&] {
    auto scope = g.insert_exprs();
    (void)F::neg(tmod::Sym{});
  }, {"empty"});
  expect_unchanged<tmod::graph_error>("unknown attribute", f, [&] {
    auto scope = g.insert_exprs();
    (void)G::attr(tmod::Sym(g.inputs().front()), "b2.conv");
  }, {"attr('b2.conv')", "no attribute"});
  expect_unchanged<tmod::graph_error>("call with two tensors where the graph takes one", f, [&] {
    auto scope = g.insert_exprs();
    const tmod::Sym x(g.inputs()[1]);
    (void)G::call(G::attr(tmod::Sym(g.inputs().front()), "b0"), x, x);
  }, {"call", "no graph for forward(Tensor, Tensor)"});
  expect_unchanged<tmod::graph_error>("call with another shape", f, [&] {
    auto scope = g.insert_exprs();
    (void)G::call(G::attr(tmod::Sym(g.inputs().front()), "b1"), F::flatten(tmod::Sym(g.inputs()[1])));
  }, {"argument 'flatten_out'", "(32,) float32", "Net_b1.Graph's input 'x' was traced with (1, 2, 4, 4) float32"});
  expect_unchanged<tmod::graph_error>("a tensor node called", f, [&] {
    auto scope = g.insert_exprs();
    (void)G::call(tmod::Sym(g.inputs()[1]), tmod::Sym(g.inputs()[1]));
  }, {"call", "is a tensor, not a module"});
}

TEST_CASE("graph probe: replace_node with null, foreign, module, reshaped and retyped nodes") {
  Traced f;
  Traced other;
  G::Graph& g = f.top();
  G::Node* relu = g.get_function_by_type(F::relu, false).as_unique()->output();
  G::Node* x = g.inputs()[1];
  expect_unchanged<tmod::graph_error>("null old node", f, [&] { g.replace_node({{nullptr, x}}); }, {"replace_node", "null"});
  expect_unchanged<tmod::graph_error>("null new node", f, [&] { g.replace_node({{relu, nullptr}}); }, {"replace_node", "null"});
  expect_unchanged<tmod::graph_error>("foreign node", f, [&] { g.replace_node({{relu, other.top().inputs()[1]}}); },
                                      {"replace_node", "belongs to", "not to Net.Graph"});
  expect_unchanged<tmod::graph_error>("module for tensor", f, [&] { g.replace_node({{relu, g.inputs().front()}}); },
                                      {"'relu_out' is a tensor node", "'self' is not"});
  // The second pair is bad: the first must not have been applied either.
  G::TensorNode* wide = g.add_input_node({1, 3, 4, 4}, tmod::DType::float32, "wide");
  G::TensorNode* ints = g.add_input_node({1, 2, 4, 4}, tmod::DType::int32, "ints");
  expect_unchanged<tmod::graph_error>("shape", f, [&] { g.replace_node({{relu, x}, {x, wide}}); },
                                      {"'x' is (1, 2, 4, 4) float32", "'wide' is (1, 3, 4, 4) float32"});
  expect_unchanged<tmod::graph_error>("dtype", f, [&] { g.replace_node({{relu, ints}}); },
                                      {"'relu_out' is (1, 2, 4, 4) float32", "'ints' is (1, 2, 4, 4) int32"});
}

TEST_CASE("graph probe: outputs and inputs: null, foreign, module nodes, sub-graphs, bad shapes, duplicate names") {
  Traced f;
  Traced other;
  G::Graph& g = f.top();
  G::Node* self = g.inputs().front();
  expect_unchanged<tmod::graph_error>("reset_outputs null", f, [&] { g.reset_outputs(G::NodeTree::leaf(nullptr)); },
                                      {"reset_outputs", "null"});
  expect_unchanged<tmod::graph_error>("reset_outputs foreign", f,
                                      [&] { g.reset_outputs(G::NodeTree::tuple({G::NodeTree::leaf(other.top().inputs()[1])})); },
                                      {"reset_outputs", "belongs to"});
  expect_unchanged<tmod::graph_error>("reset_outputs module", f,
                                      [&] { g.reset_outputs(G::NodeTree::list({G::NodeTree::leaf(g.inputs()[1]), G::NodeTree::leaf(self)})); },
                                      {"reset_outputs", "'self'", "module node"});
  expect_unchanged<tmod::graph_error>("reset_outputs sub-graph", f,
                                      [&] { f.b0().reset_outputs(G::NodeTree::leaf(f.b0().inputs()[1])); },
                                      {"reset_outputs only supports the top graph", "Net_b0.Graph"});
  expect_unchanged<tmod::graph_error>("add_output_node null", f, [&] { g.add_output_node(nullptr); }, {"add_output_node", "null"});
  expect_unchanged<tmod::graph_error>("add_output_node module", f, [&] { g.add_output_node(self); },
                                      {"add_output_node", "module node"});
  expect_unchanged<tmod::graph_error>("add_output_node foreign", f, [&] { g.add_output_node(other.top().outputs().front()); },
                                      {"add_output_node", "belongs to"});
  expect_unchanged<tmod::graph_error>("add_output_node sub-graph", f, [&] { f.b0().add_output_node(f.b0().inputs()[1]); },
                                      {"add_output_node only supports the top graph"});
  expect_unchanged<tmod::graph_error>("add_input_node sub-graph", f, [&] { (void)f.b0().add_input_node({1}); },
                                      {"add_input_node only supports the top graph"});
  expect_unchanged<tmod::shape_error>("add_input_node negative extent", f, [&] { (void)g.add_input_node({1, -2}); },
                                      {"negative extent -2"});
  // A duplicate name is made unique, as MegEngine's namespace does.
  G::TensorNode* dup = g.add_input_node({1}, tmod::DType::float32, "x");
  CHECK(dup->name() == "x_1");
  tmod::check(g);
}

TEST_CASE("graph probe: erase of null, foreign, input, used and output exprs") {
  Traced f;
  Traced other;
  G::Graph& g = f.top();
  G::Expr* relu = g.get_function_by_type(F::relu, false).as_unique();
  expect_unchanged<tmod::graph_error>("null", f, [&] { g.erase(nullptr); }, {"Net.Graph", "null expr"});
  expect_unchanged<tmod::graph_error>("foreign", f, [&] { g.erase(other.top().outputs().front()->expr()); },
                                      {"Net.Graph", "is not in the graph"});
  expect_unchanged<tmod::graph_error>("input", f, [&] { g.erase(g.inputs()[1]->expr()); }, {"is not in the graph"});
  expect_unchanged<tmod::graph_error>("used", f, [&] { g.erase(relu); },
                                      {"cannot delete %" + std::to_string(relu->id()), "'relu_out' still has users"});
  G::Expr* last = g.outputs().front()->expr();
  expect_unchanged<tmod::graph_error>("output", f, [&] { g.erase(last); },
                                      {"cannot delete %" + std::to_string(last->id()), "is an output of the graph"});
  CHECK(tmod::Tensor(f.t(f.x)).shape() == tmod::Shape{1, 2, 4, 4});
}

TEST_CASE("graph probe: ids and names that match nothing, or more than one") {
  Traced f;
  const G::Graph& g = f.top();
  expect_unchanged<tmod::graph_error>("unknown node id", f, [&] { (void)g.get_node_by_id(987654).as_unique(); },
                                      {"expected exactly one node, found 0"});
  expect_unchanged<tmod::graph_error>("negative expr id", f, [&] { (void)g.get_expr_by_id(-1).as_unique(); },
                                      {"expected exactly one expr, found 0"});
  expect_unchanged<tmod::graph_error>("duplicate ids", f, [&] { (void)g.get_node_by_id({1, 1, 2}).as_unique(); },
                                      {"found 2", "(ids 1 2)"});
  expect_unchanged<tmod::graph_error>("name matching many", f, [&] { (void)g.get_node_by_name("*relu*").as_unique(); },
                                      {"expected exactly one node, found 3"});
  CHECK(g.get_node_by_id(std::vector<std::int64_t>{}).empty());
  CHECK(g.get_node_by_name("").empty());
}

TEST_CASE("graph probe: watch and end points: null, foreign, sub-graph, removed") {
  Traced f;
  Traced other;
  G::Graph& g = f.top();
  expect_unchanged<tmod::graph_error>("watch null", f, [&] { f.t.set_watch_points({nullptr}); }, {"set_watch_points", "null"});
  expect_unchanged<tmod::graph_error>("watch foreign", f, [&] { f.t.set_watch_points({other.top().inputs()[1]}); },
                                      {"set_watch_points", "'x'", "is not a node of Net's graphs"});
  expect_unchanged<tmod::graph_error>("end null", f, [&] { f.t.set_end_points({nullptr}); }, {"set_end_points", "null"});
  expect_unchanged<tmod::graph_error>("end in a sub-graph", f, [&] { f.t.set_end_points({f.b0().outputs().front()}); },
                                      {"end points must be nodes of the top graph"});
  expect_unchanged<tmod::graph_error>("watch in a sub-graph", f, [&] { f.t.set_watch_points({f.b0().outputs().front()}); },
                                      {"set_watch_points", "sub-graph Net_b0.Graph", "flatten()"});
  f.t.set_watch_points({g.inputs()[1], g.outputs().front()});
  (void)f.t(f.x);
  CHECK(f.t.watch_node_value().size() == 2);
  G::Node* dead = nullptr;
  {
    auto scope = g.insert_exprs();
    dead = F::exp(tmod::Sym(g.outputs().front())).node();
  }
  f.t.set_end_points({dead});
  g.compile();
  expect_unchanged<tmod::graph_error>("end point removed by compile", f, [&] { (void)f.t(f.x); },
                                      {"end point 'exp_out'", "no longer a node"});
  f.t.clear_end_points();
  CHECK(tmod::Tensor(f.t(f.x)).shape() == tmod::Shape{1, 2, 4, 4});
}

TEST_CASE("graph probe: calls with a wrong count, shape, dtype or an undefined tensor") {
  Traced f;
  expect_unchanged<tmod::graph_error>("count", f, [&] { (void)f.t(f.x, f.x); }, {"takes 1 input, got 2"});
  expect_unchanged<tmod::shape_error>("shape", f, [&] { (void)f.t(tmod::zeros({1, 2, 4, 5})); },
                                      {"input 'x'", "(1, 2, 4, 5)", "(1, 2, 4, 4)"});
  expect_unchanged<tmod::dtype_error>("dtype", f, [&] { (void)f.t(tmod::zeros({1, 2, 4, 4}, tmod::DType::int32)); },
                                      {"input 'x'", "int32", "float32"});
  expect_unchanged<tmod::value_error>("undefined", f, [&] { (void)f.t(tmod::Tensor{}); }, {"input 'x'", "defined"});
}

TEST_CASE("graph probe: setattr and getattr with empty, unknown, dotted and mistyped names") {
  Traced f;
  expect_unchanged<tmod::module_error>("getattr unknown", f, [&] { (void)f.t.getattr("b2"); },
                                       {"getattr('b2')", "has no attribute 'b2'"});
  expect_unchanged<tmod::module_error>("getattr empty", f, [&] { (void)f.t.getattr(""); }, {"getattr('')", "empty"});
  expect_unchanged<tmod::module_error>("dotted name of no attribute", f, [&] { (void)f.t.getattr("a.b"); },
                                       {"getattr('a.b')", "no attribute 'a'", "'a.b' is a path"});
  expect_unchanged<tmod::module_error>("setattr below a missing module", f, [&] { f.t.setattr("a.b", tmod::zeros({1})); },
                                       {"setattr('a.b')", "no attribute 'a'", "'a.b' is a path"});
  expect_unchanged<tmod::module_error>("setattr below a tensor", f, [&] { f.t.setattr("b0.conv.weight.x", tmod::zeros({1})); },
                                       {"'b0.conv.weight' is a", "not a module"});
  expect_unchanged<tmod::module_error>("empty component", f, [&] { f.t.setattr("b0..w", tmod::zeros({1})); },
                                       {"empty component"});
}

}  // namespace tmod_test_robustness_graph_probe
