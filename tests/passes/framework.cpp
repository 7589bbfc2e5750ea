// The pass framework (registry, requirements, fixpoint, errors), the helper passes AttrToConstant,
// FoldConstant and NormElemWise (MegEngine's docstring examples), and the pattern matcher DSL.
#include "passes_test.hpp"

#include <models/add_chain.hpp>

#include <stdexcept>

namespace tmod_test_passes_framework {

namespace {

using namespace passes_test;
namespace P = tracemod::passes;

/// x * scale + bias: tensor attributes.
struct AffineNet : tmod::Module {
  tmod::Parameter scale{tmod::tensor({2.f})};
  tmod::Parameter bias{tmod::tensor({0.5f, -1.f, 3.f})};
  TM_MODULE(AffineNet, scale, bias)
  auto forward(const auto& x) const { return x * scale + bias; }
};

/// s = x + 1 feeds a chain relu(s) -> p * p -> q + s and the output's multiplication.
struct DeadChain : tmod::Module {
  TM_MODULE(DeadChain)
  auto forward(const auto& x) const {
    auto s = x + 1.f;
    auto p = F::relu(s);
    auto q = p * p;
    auto r = q + s;
    return r * 3.f;
  }
};

/// x + 1 + 1 + ... (`adds` additions).
using models::AddChain;

/// MegEngine's NormElemWise docstring: b = 1 - a; c = 2 * b; d = c / 4 (its 1 / c needs pow).
struct NormNet : tmod::Module {
  TM_MODULE(NormNet)
  auto forward(const auto& a) const {
    auto b = 1.f - a;
    auto c = 2.f * b;
    return c / 4.f;
  }
};

/// relu(relu(x)) + relu(x): a custom pass folds the double relu.
struct DoubleRelu : tmod::Module {
  TM_MODULE(DoubleRelu)
  auto forward(const auto& x) const {
    auto r = F::relu(x);
    auto rr = F::relu(r);
    return rr + F::relu(x);
  }
};

struct Shared : tmod::Module {
  TM_MODULE(Shared)
  auto forward(const auto& x) const {
    auto r = F::relu(x);
    auto s = F::relu(r);
    return std::make_tuple(s, r);  // r is an output as well as relu's input
  }
};

struct ConvPair : tmod::Module {
  M::Conv2d a{3, 4, 3, {.padding = 1}};
  M::Conv2d b{4, 4, 1, {.groups = 2}};
  TM_MODULE(ConvPair, a, b)
  auto forward(const auto& x) const {
    auto y = a(x);
    auto z = b(y);
    return F::max_pool2d(z, 2);
  }
};

const tmod::Tensor input = tmod::randn({2, 3}, 7);

TEST_CASE("optimize: unknown pass names are rejected before any work, listing the known ones") {
  AffineNet net;
  tmod::TracedModule m = tmod::trace_module(net, input);
  try {
    static_cast<void>(tmod::optimize(m, {"FuseConvBn", "FuseBnConv"}));
    FAIL("no error");
  } catch (const tmod::value_error& e) {
    const std::string what = e.what();
    CHECK(what.find("'FuseBnConv'") != std::string::npos);
    for (const char* known : {"AttrToConstant", "FoldConstant", "NormElemWise", "FuseConvBn", "FuseAddMul", "BackwardFoldScale"})
      CHECK(what.find(known) != std::string::npos);
  }
  CHECK_THROWS_AS(static_cast<void>(tmod::optimize(m, {""})), tmod::error);
}

TEST_CASE("optimize: no passes is a copy that computes the same") {
  AffineNet net;
  tmod::TracedModule m = tmod::trace_module(net, input);
  tmod::TracedModule copy = optimized_matches(m, {}, input);
  CHECK(text(copy) == text(m));
}

TEST_CASE("AttrToConstant and FoldConstant: weights become Constants, constant-only exprs fold") {
  AffineNet net;
  tmod::TracedModule m = tmod::trace_module(net, input);
  CHECK(join(ops(m.graph())) == "getattr:scale __mul__ getattr:bias __add__");
  tmod::TracedModule a = optimized_matches(m, {"AttrToConstant"}, input);
  CHECK(join(ops(a.graph())) == "const __mul__ const __add__");
  CHECK(a.graph().get_node_by_name("scale").as_count() == 1);  // the constant keeps the attribute's name
  // Surgery makes a computation on attributes only: x * scale + (relu(scale) * 2 - bias).
  {
    G::Graph& g = m.graph();
    G::Node* scale = g.get_node_by_name("scale").as_unique();
    G::Node* bias = g.get_node_by_name("bias").as_unique();
    G::Expr* add = g.get_method_by_type("__add__").as_unique();
    G::Node* folded = nullptr;
    {
      auto scope = g.insert_exprs(bias->expr());
      folded = (F::relu(tmod::Sym(scale)) * 2.f - tmod::Sym(bias)).node();
    }
    add->replace_inputs(bias, folded);
    g.compile();
  }
  CHECK(join(ops(m.graph())) == "getattr:scale __mul__ getattr:bias nn.relu __mul__ __sub__ __add__");
  tmod::TracedModule f = optimized_matches(m, {"FoldConstant"}, input);
  CHECK(join(ops(f.graph())) == "const __mul__ const __add__");
  // The folded constant holds relu(2) * 2 - bias, computed here independently.
  const G::Expr* c = f.graph().exprs(false).as_list()[4];
  REQUIRE(c->kind() == G::ExprKind::constant);
  CHECK(c->const_tensor().shape() == tmod::Shape{3});
  CHECK(c->const_tensor().data<float>()[0] == 3.5f);
  CHECK(c->const_tensor().data<float>()[1] == 5.f);
  CHECK(c->const_tensor().data<float>()[2] == 1.f);
}

TEST_CASE("NormElemWise: MegEngine's docstring example in add/mul form") {
  NormNet net;
  tmod::TracedModule m = tmod::trace_module(net, input);
  CHECK(join(calls(m.graph())) == "__rsub__ __rmul__ __truediv__");
  tmod::TracedModule n = optimized_matches(m, {"NormElemWise"}, input);
  // b = 1 - a -> neg(a) + 1; c = 2 * b -> b * 2; d = c / 4 -> c * 0.25
  CHECK(join(calls(n.graph())) == "elemwise.neg __add__ __mul__ __mul__");
  std::vector<double> constants;
  for (const G::Expr* e : n.graph().exprs(false))
    for (const auto& [pos, v] : e->const_val())
      if (pos == 1 && v.is_number()) constants.push_back(v.number());
  CHECK(constants == std::vector<double>{1.0, 2.0, 0.25});
}

TEST_CASE("register_pass: a user pass written with the matcher, requirements, fixpoint and errors") {
  // relu(relu(x)) -> relu(x) when the inner relu has no other user.
  static bool registered = false;
  if (!registered) {
    registered = true;
    tmod::register_pass({.name = "TestFoldDoubleRelu",
                         .requirements = {"NormElemWise"},
                         .run_once = false,
                         .max_iterations = 10,
                         .run = [](G::Graph& g) {
                           const P::Pattern inner = P::is_op(F::relu)(P::any_node());
                           const P::Pattern outer = P::is_op(F::relu)(inner);
                           return P::rewrite_backward(g, [&](G::Expr& e) -> G::Expr* {
                             P::PatternMatcher matcher;
                             if (!matcher.match(outer, e)) return nullptr;
                             P::replace_and_erase(g, e.output(), matcher[inner]->output());
                             return matcher[inner];
                           });
                         }});
    tmod::register_pass({.name = "TestNeverConverges", .run_once = false, .max_iterations = 3,
                         .run = [](G::Graph&) { return true; }});
    tmod::register_pass({.name = "TestCycleA", .requirements = {"TestCycleB"}, .run = [](G::Graph&) { return false; }});
    tmod::register_pass({.name = "TestCycleB", .requirements = {"TestCycleA"}, .run = [](G::Graph&) { return false; }});
  }
  DoubleRelu net;
  tmod::TracedModule m = tmod::trace_module(net, input);
  tmod::TracedModule opt = optimized_matches(m, {"TestFoldDoubleRelu"}, input);
  CHECK(join(calls(opt.graph())) == "nn.relu nn.relu __add__");

  CHECK_THROWS_WITH_AS(static_cast<void>(tmod::optimize(m, {"TestNeverConverges"})),
                       doctest::Contains("'TestNeverConverges' still changed the graph after 3 iterations"),
                       tmod::graph_error);
  CHECK_THROWS_WITH_AS(static_cast<void>(tmod::optimize(m, {"TestCycleA"})), doctest::Contains("requires itself"),
                       tmod::graph_error);
  CHECK_THROWS_AS(tmod::register_pass({.name = "FuseConvBn", .run = [](G::Graph&) { return false; }}), tmod::value_error);
  CHECK_THROWS_AS(tmod::register_pass({.name = "TestNoRun"}), tmod::value_error);
  const auto names = tmod::registered_passes();
  CHECK(std::find(names.begin(), names.end(), "TestFoldDoubleRelu") != names.end());
}

TEST_CASE("a rewrite erases what it left unused and nothing else") {
  DeadChain net;
  tmod::TracedModule m = tmod::trace_module(net, input);
  G::Graph& g = m.graph();
  CHECK(join(ops(g)) == "__add__ nn.relu __mul__ __add__ __mul__");
  const auto list = g.exprs(false).as_list();  // self, x, s, relu, q, r, out
  G::Expr* s = list[2];
  G::Expr* r = list[5];
  G::Expr* out = list[6];
  const std::string r_name = r->output()->name();
  // An unused relu of x that the rewrite does not touch: a local erase leaves it (compile would not).
  {
    P::Builder b(g, *out);
    static_cast<void>(b.call(F::entry_of(F::relu), {list[1]->output()}));
  }
  CHECK(join(ops(g)) == "__add__ nn.relu __mul__ __add__ nn.relu __mul__");
  // An expr that is still used stays, and so does everything it reads.
  CHECK(P::erase_unused(g, {s, r}) == 0);
  CHECK(g.exprs(false).as_list().size() == 8);
  // r's uses go to s: r, then q (p * p: its one producer listed twice), then relu(s) are left unused;
  // s itself still feeds the output's multiplication.
  P::replace_and_erase(g, r->output(), s->output());
  CHECK(join(ops(g)) == "__add__ nn.relu __mul__");
  const auto after = g.exprs(false).as_list();
  REQUIRE(after.size() == 5);
  CHECK(after[2] == s);
  CHECK(after[4] == out);
  CHECK(out->inputs().front() == s->output());
  CHECK(s->output()->users() == std::vector<G::Expr*>{out});
  CHECK(s->output()->name() == r_name);  // the replacement takes the replaced node's name
  tmod::check(g);
  // Independent reference: (x + 1) * 3.
  const tmod::Tensor y = m(input).tensor();
  for (std::int64_t i = 0; i < y.numel(); ++i) CHECK(y.data<float>()[i] == doctest::Approx((input.data<float>()[i] + 1.f) * 3.f));
  // The unused relu goes when asked for, and the graph's input stays.
  CHECK(P::erase_unused(g, {after[3], list[1]}) == 1);
  CHECK(join(ops(g)) == "__add__ __mul__");
}

TEST_CASE("FuseAddMul folds a long chain of additions into one, leaving nothing unused") {
  for (const int n : {2, 3, 40}) {
    AddChain net(n);
    tmod::TracedModule m = tmod::trace_module(net, input);
    CHECK(calls(m.graph()).size() == static_cast<std::size_t>(n));
    tmod::TracedModule opt = optimized_matches(m, {"FuseAddMul"}, input);
    CHECK(join(calls(opt.graph())) == "__add__");
    CHECK(opt.graph().exprs(false).as_list().size() == 3);  // self, x, the addition
    const tmod::Tensor y = opt(input).tensor();
    for (std::int64_t i = 0; i < y.numel(); ++i)
      CHECK(y.data<float>()[i] == doctest::Approx(input.data<float>()[i] + static_cast<float>(n)));
  }
}

TEST_CASE("pattern matcher: ops, calls, alternatives, variables, predicates and the single-user rule") {
  DoubleRelu net;
  tmod::TracedModule m = tmod::trace_module(net, input);
  G::Graph& g = m.graph();
  const auto list = g.exprs(false).as_list();  // self, x, relu, relu, relu, __add__
  G::Expr& r1 = *list[2];
  G::Expr& rr = *list[3];
  G::Expr& r2 = *list[4];
  G::Expr& add = *list[5];
  P::PatternMatcher matcher;
  const P::Pattern x = P::is_var();
  CHECK(matcher.match(P::is_op(F::relu), r1));
  CHECK_FALSE(matcher.match(P::is_op(F::relu6), r1));
  CHECK(matcher.match(P::is_op("nn.relu")(x), r1));
  CHECK(matcher[x] == list[1]);  // the graph input's Input expr
  CHECK_FALSE(matcher.match(P::is_op(F::relu)(P::is_const()), r1));
  CHECK_FALSE(matcher.match(P::is_op(F::relu)(x, x), r1));  // one input, two patterns
  CHECK(matcher.match(P::is_op(F::relu)().not_all_args(), r1));
  // relu(relu(x)): the inner relu has one user.
  const P::Pattern inner = P::is_op(F::relu)(x);
  CHECK(matcher.match(P::is_op(F::relu)(inner), rr));
  CHECK(matcher[inner] == &r1);
  // relu(x) + relu(...): the same variable must be the same expr: rr and r2 are different exprs.
  const P::Pattern same = P::any_node();
  CHECK_FALSE(matcher.match(same + same, add));
  CHECK(matcher.match(P::any_node() + P::any_node(), add));
  CHECK(matcher.match((P::is_op(F::relu6)(x) + P::any_node()) | (P::any_node() + P::is_op(F::relu)(x)), add));
  CHECK(matcher.match(P::is_op(F::relu)(P::is_op(F::relu)(x)) + P::is_op(F::relu)(x), add));
  // x is used by r1 and r2: as an intermediate (check_users(true)) it blocks the match.
  CHECK_FALSE(matcher.match(P::is_op(F::relu)(P::any_node().check_users(true)), r1));
  // The single-user rule: r1 feeds rr only, but a pattern that consumes rr's input twice fails,
  // and an intermediate that is also used elsewhere blocks the match.
  CHECK_FALSE(matcher.match(P::any_node() + P::is_op(F::relu)(P::is_op(F::relu)(x).check_users(true)), add));
  CHECK(matcher.match(P::is_op(F::relu).where([&](const G::Expr& e) { return &e == &r2; }), r2));
  CHECK_FALSE(matcher.match(P::is_op(F::relu).where([&](const G::Expr& e) { return &e == &r2; }), r1));
}

TEST_CASE("pattern matcher: a result used outside the pattern or returned blocks the match") {
  Shared net;
  tmod::TracedModule m = tmod::trace_module(net, input);
  const auto list = m.graph().exprs(false).as_list();
  P::PatternMatcher matcher;
  CHECK_FALSE(matcher.match(P::is_op(F::relu)(P::is_op(F::relu)), *list[3]));
  CHECK(matcher.match(P::is_op(F::relu)(P::is_op(F::relu).check_users(false)), *list[3]));
}

TEST_CASE("pattern matcher: module patterns with attribute predicates and function params") {
  ConvPair net;
  tmod::TracedModule m = tmod::trace_module(net, tmod::randn({1, 3, 8, 8}, 1));
  const auto list = m.graph().exprs(false).as_list();
  G::Expr* pool = list.back();
  P::PatternMatcher matcher;
  const P::Pattern grouped = P::is_op<M::Conv2d>().has_attr<M::Conv2d>([](const M::Conv2d& c) { return c.groups == 2; });
  CHECK(matcher.match(P::is_op(F::max_pool2d)(grouped(P::is_op<M::Conv2d>())), *pool));
  CHECK_FALSE(matcher.match(P::is_op(F::max_pool2d)(grouped(P::is_op<M::Conv2d>().has_attr<M::Conv2d>(
                                [](const M::Conv2d& c) { return c.groups == 2; }))),
                            *pool));
  CHECK(matcher.match(P::is_op(F::max_pool2d).has_params("kernel_size", tmod::Value::tuple({2, 2})), *pool));
  CHECK_FALSE(matcher.match(P::is_op(F::max_pool2d).has_params("kernel_size", tmod::Value::tuple({3, 3})), *pool));
}

}  // namespace

}  // namespace tmod_test_passes_framework
