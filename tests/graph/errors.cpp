// Bad input to the runtime graph: each a clear tmod::error, and nothing changed.
#include "graph_test.hpp"

#include <string>

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

}  // namespace

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
  CHECK(error_of<tmod::shape_error>([&] { (void)t(tmod::zeros({3, 4}, tmod::DType::int32)); }).find("int32") !=
        std::string::npos);
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
  // Break users() by hand (low-level access), then repair it.
  auto& users = tmod::graph::node_access::users(*add_out);
  const auto saved = users;
  users.clear();
  CHECK(error_of<tmod::graph_error>([&] { tmod::check(g); }).find("node 'add_out' lists 0 users, but 1 exprs use it") !=
        std::string::npos);
  users = saved;
  tmod::graph::node_access::set_id(*add_out, 1);
  CHECK(error_of<tmod::graph_error>([&] { tmod::check(g); }).find("node id 1 is used twice") != std::string::npos);
  tmod::graph::node_access::set_id(*add_out, 2);
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
