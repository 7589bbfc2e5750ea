// Graph surgery (MegEngine's insert_exprs, replace_node, add_input_node, add_output_node,
// reset_outputs) on small nets calling F::relu and on the traced ResNet-18, whose relus are M::ReLU
// module calls. Every modified module runs and is compared with the eager model modified by hand;
// every rejected surgery leaves the printed graph unchanged.
#include <tracemod/core.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/traced_module/surgery.hpp>
#include <tracemod/graph/register_builtin.hpp>
#include <tracemod/graph/wrap.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/traced_module.hpp>

#include <models/resnet.hpp>

#include <doctest/doctest.h>

#include "graph/opaque_scale.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace tmod_test_graph_surgery {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
namespace G = tracemod::graph;

/// conv -> relu -> +1: the relu is a CallFunction in the block's own graph.
struct ReluBlock : tmod::Module {
  M::Conv2d conv{3, 3, 3, {.padding = 1}};
  TM_MODULE(ReluBlock, conv)
  auto forward(const auto& x) const {
    auto y = conv(x);
    auto r = F::relu(y);
    return r + 1;
  }
};

/// Two blocks with a relu between them (a relu in the top graph and one in each sub-graph).
struct ReluNet : tmod::Module {
  ReluBlock b0;
  ReluBlock b1;
  TM_MODULE(ReluNet, b0, b1)
  auto forward(const auto& x) const {
    auto a = b0(x);
    auto r = F::relu(a);
    return b1(r);
  }
};

/// Wrapped once, at namespace scope (the registry refuses a second op of the same name). The
/// generic one gets its shape by recording on Syms, the Tensor-only one by running on zeros.
const auto my_relu6 = tmod::wrap("my_relu6", [](const auto& x) { return F::minimum(F::relu(x), 6.f); });
const auto scaled_sum = tmod::wrap<2>("surgery_scaled_sum", [](const tmod::Tensor& a, const tmod::Tensor& b) {
  return (a + b) * 0.5f;
});

/// Calls both wrapped functions in forward.
struct WrapUser : tmod::Module {
  TM_MODULE(WrapUser)
  auto forward(const auto& x) const {
    auto a = my_relu6(x);
    return scaled_sum(a, x);
  }
};

/// MegEngine's MyNeg, nested three deep: each level a user module that gets a sub-graph of its own
/// when called in an insert_exprs scope.
struct NegLeaf : tmod::Module {
  M::Identity id;
  tmod::Parameter bias{tmod::tensor({0.25f})};
  TM_MODULE(NegLeaf, id, bias)
  auto forward(const auto& x) const { return F::neg(id(x)) + bias; }
};
struct NegMid : tmod::Module {
  NegLeaf leaf;
  TM_MODULE(NegMid, leaf)
  auto forward(const auto& x) const { return leaf(x) * 2; }
};
struct MyNeg : tmod::Module {
  NegMid mid;
  TM_MODULE(MyNeg, mid)
  auto forward(const auto& x) const { return mid(x) - 1; }
};

/// MyNeg's forward written by hand.
tmod::Tensor my_neg_by_hand(const tmod::Tensor& v) { return (F::neg(v) + 0.25f) * 2.f - 1.f; }

/// A user module made builtin at run time (once per executable): opaque in tracing and surgery,
/// saved as (type, config, tensors) and rebuilt from the registry.
using opaque_test::OpaqueScale;
using opaque_test::UsesOpaque;
const bool opaque_scale_registered = (tmod::register_as_builtin<OpaqueScale>(), true);

/// A ReluNet, an input and its trace.
struct TracedReluNet {
  ReluNet net;
  tmod::Tensor x = tmod::randn({1, 3, 8, 8});
  tmod::TracedModule t = tmod::trace_module(net, x);
};

double max_abs_diff(const tmod::Tensor& a, const tmod::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double m = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, static_cast<double>(std::fabs(a.data<float>()[i] - b.data<float>()[i])));
  return m;
}

tmod::TracedModule& sub(tmod::TracedModule& m, const std::string& path) {
  return m.getattr(path).as<tmod::TracedModule>();
}

std::string text(const G::Graph& g) { return G::to_string(g); }

/// Every printed graph of the hierarchy, to compare before and after a rejected surgery.
std::string all_text(const G::Graph& g) {
  std::string s;
  for (const G::Graph* sub : g.graphs(true)) s += text(*sub) + "\n";
  return s;
}

std::vector<G::Expr*> relu_module_calls(const G::Graph& g) {
  std::vector<G::Expr*> v;
  for (G::Expr* e : g.get_method_by_type("__call__"))
    if (static_cast<const G::ModuleNode*>(e->inputs().front())->module_type() == "ReLU") v.push_back(e);
  return v;
}

/// Each ReLU call's output replaced by `act` of its input, inserted right after it.
template <class Act>
void replace_relu_calls(const std::vector<G::Expr*>& calls, Act act) {
  for (G::Expr* e : calls) {
    G::Graph& g = *e->top_graph();
    G::Node* replacement = nullptr;
    {
      auto scope = G::insert_exprs(g, e);
      replacement = act(tmod::Sym(e->inputs()[1])).node();
    }
    G::replace_node(g, {{e->output(), replacement}});
  }
}

struct ReluOnly : tmod::Module {
  TM_MODULE(ReluOnly)
  auto forward(const auto& x) const { return F::relu(x); }
};

G::Expr* module_call(const G::Graph& g, const std::string& type) {
  for (G::Expr* e : g.get_method_by_type("__call__", false))
    if (static_cast<const G::ModuleNode*>(e->inputs().front())->module_type() == type) return e;
  FAIL("no call of a " << type);
  return nullptr;
}

/// The ResNet-18 forward written by hand with `act` in place of every ReLU, `act1` in layer1's.
template <class Act, class Act1>
tmod::Tensor resnet_by_hand(const models::ResNet& n, const tmod::Tensor& x, Act act, Act1 act1) {
  const auto block = [](const auto& b, const tmod::Tensor& in, const auto& a) {
    tmod::Tensor o = b.bn2(b.conv2(a(b.bn1(b.conv1(in)))));
    tmod::Tensor sc = in;
    if constexpr (requires { b.downsample(in); }) sc = b.downsample(in);
    return a(o + sc);
  };
  const auto stage = [&](const auto& s, const tmod::Tensor& in, const auto& a) {
    return block(s.template get<1>(), block(s.template get<0>(), in, a), a);
  };
  tmod::Tensor y = n.maxpool(act(n.bn1(n.conv1(x))));
  y = stage(n.layer4, stage(n.layer3, stage(n.layer2, stage(n.layer1, y, act1), act), act), act);
  return n.fc(F::flatten(n.avgpool(y), {.start_axis = 1}));
}
template <class Act>
tmod::Tensor resnet_by_hand(const models::ResNet& n, const tmod::Tensor& x, Act act) {
  return resnet_by_hand(n, x, act, act);
}

}  // namespace

TEST_CASE("insert_exprs: F::neg after every relu of every graph, ids continue, names unique") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  G::Graph& root = t.graph();
  std::int64_t max_node = -1, max_expr = -1;
  for (const G::Expr* e : root.exprs(true)) {
    max_expr = std::max(max_expr, e->id());
    for (const G::Node* n : e->outputs()) max_node = std::max(max_node, n->id());
  }
  std::vector<G::Expr*> relus;
  for (G::Expr* e : root.get_function_by_type(F::relu)) relus.push_back(e);
  REQUIRE(relus.size() == 3);  // top graph, b0's graph, b1's graph
  for (G::Expr* e : relus) {
    G::Graph& g = *e->top_graph();
    G::Node* r = e->output();
    G::Node* neg = nullptr;
    {
      auto scope = G::insert_exprs(g, e);
      neg = F::neg(tmod::Sym(r)).node();
    }
    G::replace_node(g, {{r, neg}});
    // Inserted right after the relu, with ids above every existing one.
    CHECK(g.position(neg->expr()) == g.position(e) + 1);
    CHECK(neg->expr()->id() > max_expr);
    CHECK(neg->id() > max_node);
    CHECK(r->users().size() == 1);
    CHECK(r->users().front() == neg->expr());
  }
  CHECK_NOTHROW(tmod::check(root));  // ids unique across the hierarchy, names unique per graph
  CHECK(text(sub(t, "b0").graph()).find("neg(relu_out, )") != std::string::npos);
  const auto blk = [](const ReluBlock& b, const tmod::Tensor& in) { return F::neg(F::relu(b.conv(in))) + 1; };
  const tmod::Tensor expected = blk(net.b1, F::neg(F::relu(blk(net.b0, x))));
  CHECK(max_abs_diff(t(x).tensor(), expected) <= 1e-6);
  CHECK(max_abs_diff(t(x).tensor(), net(x)) > 1e-3);  // the surgery changed the result
}

TEST_CASE("insert_exprs: the new exprs go after the last producer they use, not before") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  G::Graph& g = t.graph();
  G::Expr* relu = g.get_function_by_type(F::relu, false).as_list().front();
  G::Node* r = relu->output();
  G::Node* y = nullptr;
  {
    auto scope = G::insert_exprs(g);  // no `after`: placed by its inputs
    y = (tmod::Sym(r) * 2).node();
  }
  CHECK(g.position(y->expr()) == g.position(relu) + 1);
}

TEST_CASE("insert_exprs: an exception inside the scope leaves the graph as it was") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  G::Graph& g = t.graph();
  G::Node* r = g.get_function_by_type(F::relu, false).as_list().front()->output();
  const std::string before = all_text(g);
  CHECK_THROWS_AS(
      [&] {
        auto scope = G::insert_exprs(g, r->expr());
        auto a = F::neg(tmod::Sym(r));
        auto b = F::exp(a);
        (void)b;
        throw std::runtime_error("user code failed");
      }(),
      std::runtime_error);
  CHECK(all_text(g) == before);
  CHECK(r->users().size() == 1);
  CHECK_NOTHROW(tmod::check(g));
  // The names of the removed nodes are free again.
  {
    auto scope = G::insert_exprs(g, r->expr());
    CHECK(F::neg(tmod::Sym(r)).node()->name() == "neg_out");
  }
}

TEST_CASE("insert_exprs: a node of another graph is rejected and the graph is unchanged") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  G::Graph& g = t.graph();
  G::Graph& b0 = sub(t, "b0").graph();
  G::Node* foreign = b0.get_function_by_type(F::relu, false).as_list().front()->output();
  G::Node* r = g.get_function_by_type(F::relu, false).as_list().front()->output();
  const std::string before = all_text(g);
  try {
    auto scope = G::insert_exprs(g, r->expr());
    auto ok = F::neg(tmod::Sym(r));
    (void)(ok + tmod::Sym(foreign));
    FAIL("a node of another graph was accepted");
  } catch (const tmod::graph_error& e) {
    CHECK(std::string(e.what()).find("belongs to") != std::string::npos);
  }
  CHECK(all_text(g) == before);
  CHECK_NOTHROW(tmod::check(g));
}

TEST_CASE("insert_exprs: attr and call on module nodes record getattr and CallMethod") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  G::Graph& g = t.graph();
  G::Node* out = g.outputs().front();
  G::Node* y = nullptr;
  {
    auto scope = G::insert_exprs(g, out->expr());
    const tmod::Sym self(g.inputs().front());
    auto conv = G::attr(self, "b1.conv");  // a builtin module: one opaque call
    auto w = G::attr(self, "b1.conv.weight");
    CHECK(w.shape() == tmod::Shape{3, 3, 3, 3});
    auto b0 = G::attr(self, "b0");  // a traced module, called with a signature it has a graph for
    y = G::call(conv, G::call(b0, tmod::Sym(out))).node();
    CHECK_THROWS_AS(G::call(b0, tmod::Sym(out), 2), tmod::graph_error);
    CHECK_THROWS_AS(G::attr(self, "nope"), tmod::graph_error);
  }
  G::add_output_node(g, y);
  const tmod::Value v = t(x);
  const tmod::Tensor expected = net.b1.conv(net.b0(v[0].tensor()));
  CHECK(max_abs_diff(v[1].tensor(), expected) <= 1e-6);
}

TEST_CASE("replace_node: MegEngine's rules, and bad replacements change nothing") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  G::Graph& g = t.graph();
  G::Expr* relu = g.get_function_by_type(F::relu, false).as_list().front();
  G::Node* a = relu->inputs().front();
  G::Node* r = relu->output();
  const std::string before = all_text(g);
  // Another kind, another graph: rejected before anything changes.
  CHECK_THROWS_AS(G::replace_node(g, {{r, g.inputs().front()}}), tmod::graph_error);
  G::Node* foreign = sub(t, "b0").graph().outputs().front();
  CHECK_THROWS_AS(G::replace_node(g, {{r, foreign}}), tmod::graph_error);
  CHECK_THROWS_AS(G::replace_node(g, {{a, a}, {r, foreign}}), tmod::graph_error);
  CHECK(all_text(g) == before);
  // Replacing the relu's input by its output: the relu itself depends on it and is skipped (no
  // cycle); only later users would move (there are none besides the relu).
  G::replace_node(g, {{a, r}});
  CHECK(relu->inputs().front() == a);
  CHECK_NOTHROW(tmod::check(g));
  // Deleting the relu: its users take its input; the relu stays until compile().
  G::replace_node(g, {{r, a}});
  CHECK(r->users().empty());
  CHECK(g.contains(relu));
  const tmod::Tensor expected = net.b1(net.b0(x));
  CHECK(max_abs_diff(t(x).tensor(), expected) <= 1e-6);
}

TEST_CASE("add_input_node with symbolic dims: the new input follows the dynamic batch, at any batch") {
  const tmod::TracedModule t =
      tmod::trace_module(ReluOnly{}, tmod::randn({2, 4}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  G::Graph& g = t.graph();
  const tmod::DimExpr n = tmod::DimExpr::symbol("N");
  const std::string before = all_text(g);
  // the dims must agree with the example shape and with the other inputs' symbols
  CHECK_THROWS_WITH_AS(G::add_input_node(g, {n, 4}, {3, 4}, tmod::DType::float32, "b"),
                       doctest::Contains("symbol N is 2 in input 'x'"), tmod::value_error);
  CHECK_THROWS_WITH_AS(G::add_input_node(g, {n * 2, 4}, {4, 4}, tmod::DType::float32, "b"),
                       doctest::Contains("symbols or constants"), tmod::value_error);
  CHECK_THROWS_AS(G::add_input_node(g, {n, 5}, {2, 4}, tmod::DType::float32, "b"), tmod::value_error);
  CHECK_THROWS_AS(G::add_input_node(g, {n}, {2, 4}, tmod::DType::float32, "b"), tmod::value_error);
  CHECK(all_text(g) == before);

  G::TensorNode* b = G::add_input_node(g, {n, 4}, {2, 4}, tmod::DType::float32, "b");
  CHECK(b->shape_text() == "(N, 4)");
  G::Node* relu_out = g.outputs().front();
  G::Node* sum = nullptr;
  {
    auto scope = G::insert_exprs(g, relu_out->expr());
    sum = (tmod::Sym(relu_out) + tmod::Sym(b)).node();
  }
  G::reset_outputs(g, G::NodeTree::leaf(sum));
  CHECK(static_cast<const G::TensorNode*>(sum)->shape_text() == "(N, 4)");
  for (const std::int64_t batch : {1, 3}) {
    const tmod::Tensor x = tmod::randn({batch, 4}), y = tmod::randn({batch, 4});
    const tmod::Tensor got = t(x, y).tensor(), want = F::relu(x) + y;
    REQUIRE(got.shape() == want.shape());
    CHECK(std::equal(got.data<float>(), got.data<float>() + got.numel(), want.data<float>()));
  }
}

TEST_CASE("input and output surgery: top graph only, outputs as nested values") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  G::Graph& g = t.graph();
  G::Graph& b0 = sub(t, "b0").graph();
  const std::string before = all_text(g);
  CHECK_THROWS_WITH_AS(G::add_input_node(b0, {1, 3}, tmod::DType::float32, "y"),
                       doctest::Contains("only supports the top graph"), tmod::graph_error);
  CHECK_THROWS_AS(G::add_output_node(b0, b0.outputs().front()), tmod::graph_error);
  CHECK_THROWS_AS(G::reset_outputs(b0, G::NodeTree::leaf(b0.inputs()[1])), tmod::graph_error);
  CHECK_THROWS_AS(G::add_output_node(g, b0.outputs().front()), tmod::graph_error);
  CHECK(all_text(g) == before);

  G::TensorNode* y = G::add_input_node(g, {1, 3, 8, 8}, tmod::DType::float32, "y");
  CHECK(y->name() == "y");
  G::add_output_node(g, y);
  const tmod::Tensor yv = tmod::randn({1, 3, 8, 8});
  const tmod::Value v = t(x, yv);
  CHECK(max_abs_diff(v[0].tensor(), net(x)) == 0);
  CHECK(max_abs_diff(v[1].tensor(), yv) == 0);
  CHECK_NOTHROW(tmod::check(g));

  // The output replaced by the input: the graph returns its input.
  G::reset_outputs(g, G::NodeTree::leaf(g.inputs()[1]));
  CHECK(max_abs_diff(t(x, yv).tensor(), x) == 0);
}

TEST_CASE("Node::set_name: a taken name is rejected and nothing changes") {
  ReluNet net;
  tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 8, 8}));
  G::Graph& g = t.graph();
  G::Node* r = g.get_function_by_type(F::relu, false).as_list().front()->output();
  const std::string taken = g.inputs()[1]->name();
  const std::string before = all_text(g);
  CHECK_THROWS_AS(r->set_name(taken), tmod::graph_error);
  CHECK(all_text(g) == before);
  r->set_name("activated");
  CHECK(text(g).find("activated = nn.relu(") != std::string::npos);
}

TEST_CASE("ResNet-18: every ReLU module call replaced by F::relu6, as the eager model by hand") {
  models::ResNet net(10, 8);
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 32, 32}) * 20.f;  // activations well above 6
  tmod::TracedModule t = tmod::trace_module(net, x);
  const std::vector<G::Expr*> calls = relu_module_calls(t.graph());
  REQUIRE(calls.size() == 17);
  replace_relu_calls(calls, [](const tmod::Sym& v) { return F::relu6(v); });
  CHECK_NOTHROW(tmod::check(t.graph()));
  CHECK(t.graph().get_function_by_type(F::relu6).as_count() == 17);
  const std::string block = text(sub(t, "layer1.0").graph());
  CHECK(block.find("relu6_out = nn.relu6(bn1_out, )") != std::string::npos);
  const tmod::Tensor expected = resnet_by_hand(net, x, [](const tmod::Tensor& v) { return F::relu6(v); });
  const tmod::Tensor plain = resnet_by_hand(net, x, [](const tmod::Tensor& v) { return F::relu(v); });
  CHECK(max_abs_diff(plain, net(x)) == 0);  // the hand-written forward is the model's
  CHECK(max_abs_diff(t(x).tensor(), expected) <= 1e-4);
  CHECK(max_abs_diff(expected, plain) > 1e-2);  // relu6 made a difference
}

TEST_CASE("ResNet-18: reset_outputs with a dict of fc's input and output and the avgpool input") {
  // Narrow (width 8: layer4 has 64 channels) and 64 x 64 (layer4's planes are 2 x 2): the surgery
  // does not depend on the sizes, and the full-width network would dominate the sanitizer run.
  models::ResNet net(10, 8);
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 64, 64});
  tmod::TracedModule t = tmod::trace_module(net, x);
  G::Graph& g = t.graph();
  G::Expr* fc = module_call(g, "Linear");
  G::Expr* pool = module_call(g, "AdaptiveAvgPool2d");
  G::reset_outputs(g, G::NodeTree::dict({{"fc_in", G::NodeTree::leaf(fc->inputs()[1])},
                                         {"fc_out", G::NodeTree::leaf(fc->output())},
                                         {"pool_in", G::NodeTree::leaf(pool->inputs()[1])}}));
  const tmod::Value v = t(x);
  CHECK(v.at("fc_in").tensor().shape() == tmod::Shape{1, 64});
  CHECK(v.at("fc_out").tensor().shape() == tmod::Shape{1, 10});
  CHECK(v.at("pool_in").tensor().shape() == tmod::Shape{1, 64, 2, 2});
  // fc applied to the returned fc input, and the pool to the returned pool input.
  CHECK(max_abs_diff(v.at("fc_out").tensor(), net.fc(v.at("fc_in").tensor())) == 0);
  CHECK(max_abs_diff(v.at("fc_in").tensor(), F::flatten(net.avgpool(v.at("pool_in").tensor()), {.start_axis = 1})) == 0);
}

TEST_CASE("tmod::wrap: eager calls run the function, recorded calls are one CallFunction") {
  const tmod::Tensor x = tmod::randn({2, 5}) * 10.f;
  CHECK(max_abs_diff(my_relu6(x), F::relu6(x)) == 0);
  CHECK(max_abs_diff(scaled_sum(x, x), x) == 0);
  WrapUser m;
  tmod::TracedModule t = tmod::trace_module(m, x);
  const std::string printed = text(t.graph());
  CHECK(printed.find("my_relu6_out = my_relu6(x, )") != std::string::npos);
  CHECK(printed.find("surgery_scaled_sum(my_relu6_out, x, )") != std::string::npos);
  CHECK(printed.find("minimum") == std::string::npos);  // the body is not traced through
  CHECK(t.graph().get_function_by_type("my_relu6").as_count() == 1);
  CHECK(max_abs_diff(t(x).tensor(), (F::relu6(x) + x) * 0.5f) <= 1e-6);
  // The registry knows it; a second op of the same name is refused.
  CHECK(tmod::functional::op_registry::instance().find("my_relu6") == &my_relu6.entry());
  CHECK_THROWS_AS(tmod::wrap("my_relu6", [](const tmod::Tensor& v) { return v; }), tmod::value_error);
}

TEST_CASE("ResNet-18: every ReLU call replaced by the wrapped my_relu6, one call each") {
  models::ResNet net(10, 8);
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 32, 32}) * 20.f;
  tmod::TracedModule t = tmod::trace_module(net, x);
  replace_relu_calls(relu_module_calls(t.graph()), [](const tmod::Sym& v) { return my_relu6(v); });
  CHECK(t.graph().get_function_by_type("my_relu6").as_count() == 17);
  const std::string block = text(sub(t, "layer1.0").graph());
  CHECK(block.find("my_relu6_out = my_relu6(bn1_out, )") != std::string::npos);
  CHECK(block.find("minimum") == std::string::npos);
  const tmod::Tensor expected = resnet_by_hand(net, x, [](const tmod::Tensor& v) { return F::relu6(v); });
  CHECK(max_abs_diff(t(x).tensor(), expected) <= 1e-4);
}

TEST_CASE("set_args_kwargs and Expr::replace_inputs on functional and tensor-method calls") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  G::Graph& top = t.graph();
  G::Graph& b0 = sub(t, "b0").graph();
  G::Expr* add = b0.get_method_by_type("__add__", false).as_list().front();  // relu_out + 1
  G::Expr* relu = b0.get_function_by_type(F::relu, false).as_list().front();
  G::Node* conv_out = relu->inputs().front();
  const std::string before = all_text(top);
  // Refused: a module call, a node of another graph, an unknown keyword, a node as a param, a node
  // produced later. Nothing changes.
  G::Expr* call = b0.get_method_by_type("__call__", false).as_list().front();
  CHECK_THROWS_WITH_AS(G::set_args_kwargs(*call, {b0.inputs()[1]}), doctest::Contains("module call"), tmod::graph_error);
  CHECK_THROWS_AS(G::set_args_kwargs(*relu, {top.inputs()[1]}), tmod::graph_error);
  CHECK_THROWS_AS(G::set_args_kwargs(*relu, {conv_out}, {{"nope", tmod::Value(1)}}), tmod::graph_error);
  CHECK_THROWS_AS(G::set_args_kwargs(*relu, {add->output()}), tmod::graph_error);
  CHECK_THROWS_AS(add->replace_inputs(relu->output(), add->output()), tmod::graph_error);
  CHECK(all_text(top) == before);
  CHECK_NOTHROW(tmod::check(top));
  // relu_out + 2 instead of + 1.
  G::set_args_kwargs(*add, {relu->output(), tmod::Value(2)});
  CHECK(text(b0).find("add_out = relu_out.__add__(2, )") != std::string::npos);
  CHECK_NOTHROW(tmod::check(top));
  // Structured bindings are not captured (clang 14): the block is passed in.
  const auto run_b0 = [](const ReluBlock& b, const tmod::Tensor& in, bool skip_relu, float k) {
    const tmod::Tensor c = b.conv(in);
    return (skip_relu ? c : F::relu(c)) + k;
  };
  CHECK(max_abs_diff(t(x).tensor(), net.b1(F::relu(run_b0(net.b0, x, false, 2.f)))) <= 1e-6);
  // The relu bypassed: the add reads the conv output.
  add->replace_inputs(relu->output(), conv_out);
  CHECK(relu->output()->users().empty());
  CHECK(max_abs_diff(t(x).tensor(), net.b1(F::relu(run_b0(net.b0, x, true, 2.f)))) <= 1e-6);
}

TEST_CASE("setattr of a builtin module on a nested traced module, then called from surgery") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  t.setattr("b1.extra", std::unique_ptr<tmod::Module>(std::make_unique<M::Linear>(8, 8)));
  G::Graph& b1 = sub(t, "b1").graph();
  G::Node* out = b1.outputs().front();
  G::Node* y = nullptr;
  {
    auto scope = G::insert_exprs(b1, out->expr());
    auto extra = G::attr(tmod::Sym(b1.inputs().front()), "extra");
    y = G::call(extra, tmod::Sym(out)).node();
  }
  CHECK(static_cast<const G::TensorNode*>(y)->shape() == tmod::Shape{1, 3, 8, 8});
  // A node whose users were recorded for its shape keeps it.
  G::Node* narrow = nullptr;
  {
    auto scope = G::insert_exprs(b1, y->expr());
    narrow = F::flatten(tmod::Sym(y)).node();
  }
  const std::string before = text(b1);
  CHECK_THROWS_WITH_AS(G::replace_node(b1, {{out, narrow}}),
                       doctest::Contains("'add_out' is (1, 3, 8, 8) float32 but its replacement 'flatten_out' is (192,) float32"),
                       tmod::graph_error);
  CHECK(text(b1) == before);
  G::replace_node(b1, {{out, y}});
  CHECK(text(b1).find("extra = getattr(self, \"extra\") -> (Linear)") != std::string::npos);
  CHECK_NOTHROW(tmod::check(t.graph()));
  const auto& lin = t.getattr("b1.extra").as<M::Linear>();
  CHECK(max_abs_diff(t(x).tensor(), lin(net(x))) <= 1e-6);
}

TEST_CASE("insert_exprs: user modules attached with setattr are traced into sub-graphs (MyNeg, three deep)") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  t.setattr("neg", MyNeg{});
  t.setattr("b1.neg", MyNeg{});
  G::Graph& top = t.graph();
  G::Graph& b1 = sub(t, "b1").graph();
  // b1's output through b1.neg, then the top output through neg, twice (one graph, two calls).
  const auto insert_at_output = [](G::Graph& g, const MyNeg& neg, int times) {
    G::Node* out = g.outputs().front();
    G::Node* y = nullptr;
    {
      auto scope = G::insert_exprs(g, out->expr());
      tmod::Sym v(out);
      for (int i = 0; i < times; ++i) v = neg(v);
      y = v.node();
    }
    G::replace_node(g, {{out, y}});
  };
  insert_at_output(b1, t.getattr("b1.neg").as<MyNeg>(), 1);
  insert_at_output(top, t.getattr("neg").as<MyNeg>(), 2);
  top.compile();
  // The attached modules became traced modules, each level with its own graph.
  for (const std::string path : {"neg", "neg.mid", "neg.mid.leaf", "b1.neg", "b1.neg.mid", "b1.neg.mid.leaf"}) {
    CAPTURE(path);
    REQUIRE(dynamic_cast<const tmod::TracedModule*>(&t.getattr(path).module()) != nullptr);
    CHECK(sub(t, path).graphs().size() == 1);
  }
  CHECK(sub(t, "neg.mid.leaf").getattr("id").module().is_builtin());
  const std::string printed = all_text(top);
  for (const std::string name : {"ReluNet_neg", "ReluNet_neg_mid", "ReluNet_neg_mid_leaf", "ReluNet_b1_neg",
                                 "ReluNet_b1_neg_mid", "ReluNet_b1_neg_mid_leaf"})
    CHECK(printed.find(name + ".Graph (self, x) {") != std::string::npos);
  CHECK(printed.find("neg_out = neg(b1_out, )") != std::string::npos);
  CHECK(printed.find("neg_out_1 = neg(neg_out, )") != std::string::npos);
  CHECK(text(sub(t, "neg.mid.leaf").graph()).find("getattr(self, \"bias\")") != std::string::npos);
  // top: b0, b1, neg twice; b0, b1: conv; b1: neg; each MyNeg: mid, leaf, id.
  CHECK(top.get_method_by_type("__call__").as_count() == 4 + 2 + 1 + 2 * 3);
  CHECK_NOTHROW(tmod::check(top));
  const tmod::Tensor b1_ref = my_neg_by_hand(net.b1(F::relu(net.b0(x))));
  CHECK(max_abs_diff(t(x).tensor(), my_neg_by_hand(my_neg_by_hand(b1_ref))) <= 1e-5);
  // A copy (clone) runs the same.
  tmod::TracedModule copy = t;
  CHECK(max_abs_diff(copy(x).tensor(), t(x).tensor()) == 0);
}

TEST_CASE("insert_exprs: an exception while tracing a user module leaves graph and attribute unchanged") {
  TracedReluNet f;
  tmod::TracedModule& t = f.t;  // not a structured binding: the lambda below reads it (clang 14)
  t.setattr("neg", MyNeg{});
  G::Graph& g = t.graph();
  const std::string before = all_text(g);
  CHECK_THROWS_AS(
      [&] {
        auto scope = G::insert_exprs(g, g.outputs().front()->expr());
        auto y = t.getattr("neg").as<MyNeg>()(tmod::Sym(g.outputs().front()));
        (void)y;
        throw std::runtime_error("user code failed");
      }(),
      std::runtime_error);
  CHECK(all_text(g) == before);
  CHECK(dynamic_cast<const MyNeg*>(&t.getattr("neg").module()) != nullptr);
  CHECK_NOTHROW(tmod::check(g));
  // A user module that is no attribute of the graph's module is refused.
  const MyNeg loose;
  CHECK_THROWS_WITH_AS(
      [&] {
        auto scope = G::insert_exprs(g);
        (void)loose(tmod::Sym(g.outputs().front()));
      }(),
      doctest::Contains("setattr"), tmod::graph_error);
  CHECK(all_text(g) == before);
}

TEST_CASE("register_as_builtin: a user module stays one opaque call in trace_module and in surgery") {
  REQUIRE(opaque_scale_registered);
  UsesOpaque m;
  const tmod::Tensor x = tmod::randn({1, 3, 6, 6});
  CHECK(m.op.is_builtin());
  tmod::TracedModule t = tmod::trace_module(m, x);
  const std::string printed = all_text(t.graph());
  CHECK(printed.find("op = getattr(self, \"op\") -> (OpaqueScale)") != std::string::npos);
  CHECK(printed.find("op_out = op(conv_out, )") != std::string::npos);
  CHECK(printed.find("neg") == std::string::npos);  // not traced through
  CHECK(dynamic_cast<const OpaqueScale*>(&t.getattr("op").module()) != nullptr);
  CHECK(t.graph().graphs(true).size() == 1);
  const tmod::Tensor expected = F::neg(m.conv(x)) * 3.f;
  CHECK(max_abs_diff(t(x).tensor(), expected) <= 1e-6);
  // Attached and called in surgery: one CallMethod, the module kept as it is.
  t.setattr("again", OpaqueScale{});
  G::Graph& g = t.graph();
  G::Node* out = g.outputs().front();
  G::Node* y = nullptr;
  {
    auto scope = G::insert_exprs(g, out->expr());
    y = t.getattr("again").as<OpaqueScale>()(tmod::Sym(out)).node();
  }
  G::replace_node(g, {{out, y}});
  CHECK(text(g).find("again_out = again(op_out, )") != std::string::npos);
  CHECK(dynamic_cast<const OpaqueScale*>(&t.getattr("again").module()) != nullptr);
  CHECK(max_abs_diff(t(x).tensor(), F::neg(expected) * 3.f) <= 1e-5);
  // The registry save/load uses knows it; a second registration is refused.
  CHECK(M::builtin_registry::instance().find("OpaqueScale") != nullptr);
  CHECK_THROWS_AS(tmod::register_as_builtin<OpaqueScale>(), tmod::value_error);
}

TEST_CASE("Graph::set_name: the top graph's name roots every qualname; a sub-graph's name is checked") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  G::Graph& top = t.graph();
  G::Graph& b0 = sub(t, "b0").graph();
  REQUIRE(b0.name() == "ReluNet_b0");
  REQUIRE(b0.qualname() == "ReluNet.b0");
  const std::string before = all_text(top);
  CHECK_THROWS_WITH_AS(b0.set_name("ReluNet_b1"), doctest::Contains("already used in ReluNet.Graph"), tmod::graph_error);
  CHECK_THROWS_AS(b0.set_name("b0_out"), tmod::graph_error);  // a node name of the parent
  CHECK_THROWS_AS(top.set_name("not valid"), tmod::graph_error);
  CHECK_THROWS_AS(top.set_name("int"), tmod::graph_error);
  CHECK(all_text(top) == before);
  // A sub-graph: the name changes, the qualname (a module path) stays; its old name is free again.
  b0.set_name("first_block");
  CHECK(text(b0).rfind("first_block.Graph (", 0) == 0);
  CHECK(b0.qualname() == "ReluNet.b0");
  CHECK(!top.names().taken("ReluNet_b0"));
  // The top graph: every qualname of the hierarchy is re-rooted.
  top.set_name("Top");
  CHECK(text(top).rfind("Top.Graph (", 0) == 0);
  CHECK(b0.qualname() == "Top.b0");
  CHECK(sub(t, "b1").graph().qualname() == "Top.b1");
  std::size_t count = 0;
  for (const G::Node* n : top.nodes(true)) {
    CAPTURE(n->qualname());
    CHECK((n->qualname() == "Top" || n->qualname().rfind("Top.", 0) == 0));
    ++count;
  }
  CHECK(count > 10);
  const G::Node* relu = sub(t, "b1").graph().get_function_by_type(F::relu, false).as_list().front()->output();
  CHECK(relu->qualname() == "Top.b1.[func_relu]");
  CHECK_NOTHROW(tmod::check(top));
  CHECK(max_abs_diff(t(x).tensor(), net(x)) == 0);
}

TEST_CASE("ResNet-18: every ReLU of layer1 deleted (output replaced by input), compiled away") {
  models::ResNet net(10, 8);
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 32, 32});
  tmod::TracedModule t = tmod::trace_module(net, x);
  G::Graph& layer1 = sub(t, "layer1").graph();
  REQUIRE(relu_module_calls(layer1).size() == 4);
  for (G::Expr* e : relu_module_calls(layer1)) {
    G::Graph& g = *e->top_graph();
    G::replace_node(g, {{e->output(), e->inputs()[1]}});
  }
  for (const std::string block : {"layer1.0", "layer1.1"}) {
    G::Graph& g = sub(t, block).graph();
    g.compile();
    CHECK(text(g).find("relu") == std::string::npos);  // the calls and the getattr of the ReLU
  }
  CHECK(relu_module_calls(layer1).empty());
  CHECK(relu_module_calls(t.graph()).size() == 17 - 4);
  CHECK_NOTHROW(tmod::check(t.graph()));
  const auto relu = [](const tmod::Tensor& v) { return F::relu(v); };
  const auto identity = [](const tmod::Tensor& v) { return v; };
  const tmod::Tensor expected = resnet_by_hand(net, x, relu, identity);
  CHECK(max_abs_diff(t(x).tensor(), expected) <= 1e-4);
  CHECK(max_abs_diff(expected, net(x)) > 1e-3);  // the relus mattered
}

TEST_CASE("insert_exprs: F::neg after each relu of every graph, then flatten: ids and names unique") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  const std::vector<G::Expr*> relus = t.graph().get_function_by_type(F::relu).as_list();
  REQUIRE(relus.size() == 3);
  for (G::Expr* e : relus) {
    G::Graph& g = *e->top_graph();
    G::Node* neg = nullptr;
    {
      auto scope = G::insert_exprs(g, e);
      neg = F::neg(tmod::Sym(e->output())).node();
    }
    G::replace_node(g, {{e->output(), neg}});
  }
  tmod::TracedModule flat = t.flatten();
  const G::Graph& g = flat.graph();
  CHECK(g.graphs(true).size() == 1);
  CHECK(g.get_function_by_type(F::neg).as_count() == 3);
  std::set<std::int64_t> expr_ids, node_ids;
  std::set<std::string> names;
  std::size_t nodes = 0;
  for (const G::Expr* e : g.exprs(true)) {
    CHECK(expr_ids.insert(e->id()).second);
    for (const G::Node* n : e->outputs()) {
      CHECK(node_ids.insert(n->id()).second);
      CHECK(names.insert(n->name()).second);
      ++nodes;
    }
  }
  CHECK(names.size() == nodes);
  CHECK_NOTHROW(tmod::check(g));
  const auto blk = [](const ReluBlock& b, const tmod::Tensor& in) { return F::neg(F::relu(b.conv(in))) + 1; };
  const tmod::Tensor expected = blk(net.b1, F::neg(F::relu(blk(net.b0, x))));
  CHECK(max_abs_diff(flat(x).tensor(), expected) <= 1e-6);
  CHECK(max_abs_diff(t(x).tensor(), expected) <= 1e-6);
}

TEST_CASE("reset_outputs: the output replaced by the input compiles to an empty graph") {
  TracedReluNet f;
  auto& [net, x, t] = f;
  G::Graph& g = t.graph();
  G::reset_outputs(g, G::NodeTree::leaf(g.inputs()[1]));
  g.compile();
  CHECK(g.exprs(false).as_count() == 2);  // the inputs self and x only
  CHECK(g.graphs(true).size() == 1);
  CHECK(text(g) == "ReluNet.Graph (self, x) {\n\t\n\treturn x\n}");  // MegEngine prints the empty expr list too
  CHECK(!g.names().taken("b0_out"));
  CHECK_NOTHROW(tmod::check(g));
  CHECK(max_abs_diff(t(x).tensor(), x) == 0);
}

}  // namespace tmod_test_graph_surgery
