// Bad input to the runtime graph: each a clear tmod::error, and nothing changed.
#include "graph_test.hpp"

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace tmod_test_graph_errors {

using namespace graph_test;

namespace {

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception");
  return {};
}

// Data-dependent control flow: eager mode looks at the value, recording cannot.
bool positive(const tmod::Tensor& t) { return t.values<float>()[0] > 0.f; }
bool positive(const tmod::Sym& s) { return static_cast<bool>(s); }
bool below_one(const tmod::Tensor& t) { return t.values<float>()[0] < 1.f; }
bool below_one(const tmod::Sym& s) { return s < 1; }

struct Branches : tmod::Module {
  TM_MODULE(Branches)
  auto forward(const auto& x) const {
    auto y = F::relu(x);
    if (positive(y)) return y;
    return x;
  }
};

struct Compares : tmod::Module {
  TM_MODULE(Compares)
  auto forward(const auto& x) const {
    auto y = F::relu(x);
    return below_one(y) ? y : x;
  }
};

struct Unreachable : tmod::Module {
  TM_MODULE(Unreachable)
  auto forward(const auto& x) const {
    static const M::ReLU outside;  // not an attribute of the traced module
    return outside(x);
  }
};

struct BadShapes : tmod::Module {
  tmod::Parameter w{tmod::ones({5, 7})};
  TM_MODULE(BadShapes, w)
  auto forward(const auto& x) const { return x + w; }
};

/// A parameter, a buffer and a user sub-module's parameter that forward never reads, beside a
/// builtin BatchNorm2d (whose counter the graph does not read either).
struct Unread : tmod::Module {
  struct Inner : tmod::Module {
    tmod::Parameter used{tmod::tensor({2.f})};
    tmod::Parameter unused{tmod::tensor({3.f})};
    TM_MODULE(Inner, used, unused)
    auto forward(const auto& x) const { return x * used; }
  };
  M::BatchNorm2d bn{1};
  Inner inner;
  tmod::Parameter scale{tmod::tensor({0.5f})};
  tmod::Parameter spare{tmod::tensor({7.f})};
  tmod::Buffer spare_buffer{tmod::tensor({8.f})};
  TM_MODULE(Unread, bn, inner, scale, spare, spare_buffer)
  auto forward(const auto& x) const { return inner(bn(x)) * scale; }
};

struct Nested : tmod::Module {
  TM_MODULE(Nested)
  auto forward(const auto& x) const {
    auto a = x + 1;
    return std::tuple{std::tuple{a, x}, a};
  }
};

struct TrainingDropout : tmod::Module {
  M::Linear fc{4, 4};
  M::Dropout drop{0.5};
  TM_MODULE(TrainingDropout, fc, drop)
  auto forward(const auto& x) const { return drop(fc(x)); }
};

}  // namespace

TEST_CASE("erase refuses a null expr and an expr whose output is a graph output") {
  AddTwice m;
  tmod::TracedModule t = tmod::trace_module(m, tmod::zeros({1}));
  tmod::graph::Graph& g = t.graph();
  const std::string before = text(g);
  tmod::graph::Expr* last = g.outputs().front()->expr();
  const std::string why = error_of<tmod::graph_error>([&] { g.erase(last); });
  CHECK(why.find("%" + std::to_string(last->id())) != std::string::npos);
  CHECK(why.find("'add_out_1' is an output of the graph") != std::string::npos);
  CHECK(error_of<tmod::graph_error>([&] { g.erase(nullptr); }).find("null expr") != std::string::npos);
  CHECK(text(g) == before);
  tmod::check(g);
  CHECK(tmod::Tensor(t(tmod::tensor({1.f}))).item() == 4.f);
}

TEST_CASE("a temporary filter's as_list() is a list of its own") {
  Net net;
  tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 6, 6}));
  const tmod::graph::Graph& g = t.graph();
  static_assert(std::is_same_v<decltype(g.nodes(true).as_list()), std::vector<tmod::graph::Node*>>);
  const tmod::graph::NodeFilter kept = g.nodes(true);
  static_assert(std::is_same_v<decltype(kept.as_list()), const std::vector<tmod::graph::Node*>&>);
  std::vector<std::string> names;
  for (const tmod::graph::Node* n : g.nodes(true).as_list()) names.push_back(n->name());
  REQUIRE(names.size() == kept.as_count());
  for (std::size_t i = 0; i < names.size(); ++i) CHECK(names[i] == kept.as_list()[i]->name());
}

TEST_CASE("insert_exprs scopes released out of order leave no recorder behind") {
  AddTwice m1, m2;
  tmod::TracedModule t1 = tmod::trace_module(m1, tmod::zeros({1}));
  tmod::TracedModule t2 = tmod::trace_module(m2, tmod::zeros({1}));
  tmod::graph::Graph& g1 = t1.graph();
  tmod::graph::Graph& g2 = t2.graph();
  std::optional<tmod::graph::InsertScope> outer;
  std::optional<tmod::graph::InsertScope> inner;
  outer.emplace(g1, nullptr);
  (void)F::neg(tmod::Sym(g1.outputs().front()));
  inner.emplace(g2, nullptr);
  // A second scope on a graph that already records is refused (its exprs would mix with the first's).
  CHECK(error_of<tmod::graph_error>([&] { (void)g2.insert_exprs(); }).find("already recording") != std::string::npos);
  (void)F::neg(tmod::Sym(g2.outputs().front()));
  outer.reset();  // the older scope ends first
  tmod::graph::Node* n2 = F::exp(tmod::Sym(g2.outputs().front())).node();  // still recorded into g2
  CHECK(n2->top_graph() == &g2);
  inner.reset();
  CHECK(error_of<tmod::graph_error>([&] { (void)F::neg(tmod::Sym{}); }).find("trace_module") != std::string::npos);
  CHECK(text(g1).find("neg_out = elemwise.neg(add_out_1, )") != std::string::npos);
  CHECK(text(g2).find("neg_out = elemwise.neg(add_out_1, )") != std::string::npos);
  CHECK(text(g2).find("exp_out = elemwise.exp(add_out_1, )") != std::string::npos);
  tmod::check(g1);
  tmod::check(g2);
}

TEST_CASE("surgery that could never run is refused at the call, naming nodes and shapes") {
  Net net;
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 6, 6});
  tmod::TracedModule t = tmod::trace_module(net, x);
  tmod::graph::Graph& g = t.graph();
  const std::string before = text(g);
  // A traced sub-module called with an argument of another shape than its graph was traced with.
  const std::string call = error_of<tmod::graph_error>([&] {
    auto scope = g.insert_exprs();
    const tmod::Sym self(g.inputs().front());
    (void)tmod::graph::call(tmod::graph::attr(self, "block0"), F::flatten(tmod::Sym(g.inputs()[1])));
  });
  CHECK(call.find("'flatten_out'") != std::string::npos);
  CAPTURE(call);
  CHECK(call.find("(108,) float32") != std::string::npos);
  CHECK(call.find("Net_block0.Graph's input 'x' was traced with (1, 3, 6, 6) float32") != std::string::npos);
  CHECK(text(g) == before);
  // replace_node with a node of another shape (the BatchNorm of block1 would fail at run time) or dtype.
  tmod::graph::Node* mid = g.get_node_by_name("block0_out", true, false).as_unique();
  tmod::graph::Node* flat = nullptr;
  {
    auto scope = g.insert_exprs(mid->expr());
    flat = F::flatten(tmod::Sym(mid)).node();
  }
  const std::string shape = error_of<tmod::graph_error>([&] { g.replace_node({{mid, flat}}); });
  CHECK(shape.find("'block0_out' is (1, 3, 6, 6) float32") != std::string::npos);
  CAPTURE(shape);
  CHECK(shape.find("'flatten_out' is (108,) float32") != std::string::npos);
  tmod::graph::TensorNode* ints = g.add_input_node({1, 3, 6, 6}, tmod::DType::int32, "ints");
  const std::string after_input = text(g);
  CHECK(error_of<tmod::graph_error>([&] { g.replace_node({{mid, ints}}); }).find("'ints' is (1, 3, 6, 6) int32") !=
        std::string::npos);
  CHECK(text(g) == after_input);
  // A module node is no output.
  tmod::graph::Node* self = g.inputs().front();
  CHECK(error_of<tmod::graph_error>([&] { g.reset_outputs(tmod::graph::NodeTree::leaf(self)); })
            .find("'self' (%0) is a Module module node") != std::string::npos);
  CHECK(error_of<tmod::graph_error>([&] { g.add_output_node(self); }).find("is a Module module node") !=
        std::string::npos);
  CHECK(text(g) == after_input);
  // An output of the top graph that no expr uses may change shape: the module then returns another.
  g.replace_node({{g.outputs().front(), flat}});
  CHECK(tmod::Tensor(t(x, tmod::zeros({1, 3, 6, 6}, tmod::DType::int32))).shape() == tmod::Shape{108});
}

TEST_CASE("watch and end points that compile() removed fail the call, naming them") {
  AddTwice m;
  tmod::TracedModule t = tmod::trace_module(m, tmod::zeros({1}));
  tmod::graph::Graph& g = t.graph();
  tmod::graph::Node* dead = nullptr;
  {
    auto scope = g.insert_exprs(g.outputs().front()->expr());
    dead = F::neg(tmod::Sym(g.outputs().front())).node();  // no user, no output: compile() drops it
  }
  t.set_end_points({dead});
  CHECK(t(tmod::tensor({1.f}))[0].tensor().item() == -4.f);
  g.compile();
  const std::string end = error_of<tmod::graph_error>([&] { (void)t(tmod::tensor({1.f})); });
  CHECK(end.find("end point 'neg_out' (%") != std::string::npos);
  CHECK(end.find("no longer a node") != std::string::npos);
  t.clear_end_points();
  tmod::graph::Node* add_out = g.get_node_by_name("add_out", true, false).as_unique();
  {
    auto scope = g.insert_exprs(add_out->expr());
    dead = F::exp(tmod::Sym(add_out)).node();
  }
  t.set_watch_points({add_out, dead});
  (void)t(tmod::tensor({1.f}));
  CHECK(t.watch_node_value().size() == 2);
  g.compile();
  CHECK(error_of<tmod::graph_error>([&] { (void)t(tmod::tensor({1.f})); }).find("watch point 'exp_out'") !=
        std::string::npos);
  t.clear_watch_points();
  CHECK(tmod::Tensor(t(tmod::tensor({1.f}))).item() == 4.f);
  // A node of another module is no watch point.
  AddTwice other;
  tmod::TracedModule u = tmod::trace_module(other, tmod::zeros({1}));
  CHECK(error_of<tmod::graph_error>([&] { t.set_watch_points({u.graph().outputs().front()}); })
            .find("is not a node of AddTwice's graphs") != std::string::npos);
}

TEST_CASE("tracing Dropout in training mode names the module and the cause when the check fails") {
  TrainingDropout m;
  const std::string why = error_of<tmod::graph_error>([&] { (void)tmod::trace_module(m, tmod::randn({8, 4}, 3)); });
  CHECK(why.find("differs from eager mode") != std::string::npos);
  CHECK(why.find("'drop'") != std::string::npos);
  CHECK(why.find("training mode") != std::string::npos);
  CHECK(why.find("eval()") != std::string::npos);
  m.eval();
  (void)tmod::trace_module(m, tmod::randn({8, 4}, 3));
}

TEST_CASE("MegEngine prints a graph's output leaves; unread tensors are no attributes of the traced module") {
  Nested n;
  tmod::TracedModule tn = tmod::trace_module(n, tmod::zeros({2}));
  CHECK(text(tn.graph()).find("\treturn add_out, x, add_out\n}") != std::string::npos);  // MegEngine's form
  const tmod::Value v = tn(tmod::ones({2}));
  REQUIRE(v.size() == 2);
  CHECK(v[0].size() == 2);  // the value keeps its nesting
  Unread u;
  u.eval();
  tmod::TracedModule t = tmod::trace_module(u, tmod::randn({1, 1, 2, 2}));
  CHECK(t.has_attr("scale"));
  CHECK(!t.has_attr("spare"));
  CHECK(!t.has_attr("spare_buffer"));
  CHECK(t.has_attr("inner.used"));
  CHECK(!t.has_attr("inner.unused"));
  for (const char* kept : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"})
    CHECK_MESSAGE(t.has_attr(kept), kept);
  check_identical(t(tmod::ones({1, 1, 2, 2})), u(tmod::ones({1, 1, 2, 2})));
}

TEST_CASE("calling a traced module with the wrong inputs") {
  SimpleModule m;
  tmod::TracedModule t = tmod::trace_module(m, tmod::zeros({3, 4}));
  const std::string before = text(t.graph());
  CHECK(error_of<tmod::graph_error>([&] { (void)t(tmod::zeros({3, 4}), tmod::zeros({3, 4})); })
            .find("takes 1 input, got 2") != std::string::npos);
  CHECK(error_of<tmod::graph_error>([&] { (void)t(); }).find("takes 1 input, got 0") != std::string::npos);
  const std::string shape = error_of<tmod::shape_error>([&] { (void)t(tmod::zeros({2, 4})); });
  CHECK(shape.find("input 'x'") != std::string::npos);
  CHECK(shape.find("(2, 4)") != std::string::npos);
  CHECK(shape.find("(3, 4)") != std::string::npos);
  CHECK(error_of<tmod::value_error>([&] { (void)t(tmod::Tensor{}); }).find("input 'x'") != std::string::npos);
  const std::string dtype = error_of<tmod::dtype_error>([&] { (void)t(tmod::zeros({3, 4}, tmod::DType::int32)); });
  CHECK(dtype.find("input 'x'") != std::string::npos);
  CHECK(dtype.find("int32") != std::string::npos);
  CHECK(dtype.find("float32") != std::string::npos);
  CHECK(text(t.graph()) == before);
  tmod::check(t.graph());
  check_identical(t(tmod::ones({3, 4})), m(tmod::ones({3, 4})));
}

TEST_CASE("as_unique with zero or two matches, unknown ids") {
  Net net;
  net.eval();
  tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 6, 6}));
  const tmod::graph::Graph& g = t.graph();
  CHECK(error_of<tmod::graph_error>([&] { (void)g.get_function_by_type(F::sigmoid).as_unique(); })
            .find("found 0") != std::string::npos);
  CHECK(error_of<tmod::graph_error>([&] { (void)g.get_function_by_type(F::relu).as_unique(); }).find("found 2") !=
        std::string::npos);
  CHECK(g.get_node_by_id(100000).as_count() == 0);
  CHECK(error_of<tmod::graph_error>([&] { (void)g.get_expr_by_id(-7).as_unique(); }).find("expected exactly one expr") !=
        std::string::npos);
}

TEST_CASE("a Sym has no value: bool() and comparisons throw, naming the node") {
  Branches b;
  const std::string why = error_of<tmod::graph_error>([&] { (void)tmod::trace_module(b, tmod::ones({2})); });
  CHECK(why.find("relu_out") != std::string::npos);
  CHECK(why.find("cannot decide a branch") != std::string::npos);
  Compares c;
  CHECK(error_of<tmod::graph_error>([&] { (void)tmod::trace_module(c, tmod::ones({2})); }).find("operator<") !=
        std::string::npos);
  // After a failed trace nothing is left recording: a Sym outside a recording is refused, and
  // tracing works again.
  CHECK(error_of<tmod::graph_error>([&] { (void)F::relu(tmod::Sym{}); }).find("trace_module") != std::string::npos);
  AddTwice a;
  CHECK(tmod::Tensor(tmod::trace_module(a, tmod::zeros({1}))(tmod::zeros({1}))).item() == 3.f);
}

TEST_CASE("shape errors while tracing name the op; modules that are no attribute are refused") {
  BadShapes m;
  const std::string why = error_of<tmod::shape_error>([&] { (void)tmod::trace_module(m, tmod::ones({2, 3})); });
  CHECK(why.find("__add__") != std::string::npos);
  CHECK(why.find("(2, 3)") != std::string::npos);
  Unreachable u;
  CHECK(error_of<tmod::graph_error>([&] { (void)tmod::trace_module(u, tmod::ones({2})); }).find("not an attribute") !=
        std::string::npos);
}

TEST_CASE("end points outside the top graph are refused and change nothing") {
  Net net;
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 6, 6});
  tmod::TracedModule t = tmod::trace_module(net, x);
  tmod::graph::Node* inner = t.graph().get_function_by_type(F::relu).as_list().front()->output();
  CHECK(error_of<tmod::graph_error>([&] { t.set_end_points({inner}); }).find("end points must be nodes of the top graph") !=
        std::string::npos);
  check_identical(t(x), net(x));  // no end point was set
}

TEST_CASE("check() names the first broken invariant") {
  AddTwice m;
  tmod::TracedModule t = tmod::trace_module(m, tmod::zeros({1}));
  tmod::graph::Graph& g = t.graph();
  tmod::graph::Node* add_out = g.get_node_by_id(2).as_unique();
  // Break users() by hand (casting away const), then repair it.
  auto& users = const_cast<std::vector<tmod::graph::Expr*>&>(add_out->users());
  const auto saved = users;
  users.clear();
  CHECK(error_of<tmod::graph_error>([&] { tmod::check(g); }).find("node 'add_out' lists 0 users, but 1 exprs use it") !=
        std::string::npos);
  users = saved;
  tmod::graph::IdAllocator::assign(*add_out, 1);
  CHECK(error_of<tmod::graph_error>([&] { tmod::check(g); }).find("node id 1 is used twice") != std::string::npos);
  tmod::graph::IdAllocator::assign(*add_out, 2);
  tmod::check(g);
}

TEST_CASE("surgery through DESIGN.md's member spelling: insert_exprs, replace_node, add_output_node, add_input_node") {
  AddTwice m;  // y = (x + 1) + 2
  tmod::TracedModule t = tmod::trace_module(m, tmod::zeros({1}));
  tmod::graph::Graph& g = t.graph();
  tmod::graph::Node* add_out = g.get_node_by_id(2).as_unique();
  tmod::graph::Node* neg = nullptr;
  {
    auto scope = g.insert_exprs(add_out->expr());
    neg = F::neg(tmod::Sym(add_out)).node();
  }
  g.replace_node({{add_out, neg}});  // the second add now reads -(x + 1); neg itself still reads add_out
  tmod::check(g);
  CHECK(text(g).find("neg_out = elemwise.neg(add_out, )") != std::string::npos);
  CHECK(text(g).find("add_out_1 = neg_out.__add__(2, )") != std::string::npos);
  CHECK(tmod::Tensor(t(tmod::tensor({3.f}))).item() == -(3.f + 1.f) + 2.f);

  g.add_output_node(add_out);
  const tmod::Value both = t(tmod::tensor({3.f}));
  REQUIRE(both.kind() == tmod::Value::Kind::tuple);
  CHECK(both[0].tensor().item() == -2.f);
  CHECK(both[1].tensor().item() == 4.f);

  tmod::graph::TensorNode* extra = g.add_input_node({1}, tmod::DType::float32, "bias");
  CHECK(extra->name() == "bias");
  CHECK(g.inputs().size() == 3);
  tmod::check(g);
  CHECK(error_of<tmod::graph_error>([&] { (void)t(tmod::tensor({3.f})); }).find("takes 2 inputs, got 1") !=
        std::string::npos);
}

}  // namespace tmod_test_graph_errors
