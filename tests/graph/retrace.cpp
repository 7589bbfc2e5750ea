// Tracing a traced module: a TracedModule inside a user module traces again as a sub-module whose
// graph is a copy of its own, nested under the new traced module (MegEngine's re-tracing of a
// TracedModule, test_trace_module.py's nested cases).
#include "graph_test.hpp"
#include "retrace_models.hpp"

#include <tracemod/passes.hpp>
#include <tracemod/trace.hpp>

#include <string>
#include <vector>

namespace tmod_test_graph_retrace {

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

}  // namespace

using retrace_models::Backbone;

/// A new net around a traced backbone: pre-processing, the backbone, a head.
struct Net : tmod::Module {
  tmod::TracedModule backbone;
  M::Conv2d head{4, 2, 1};
  TM_MODULE(Net, backbone, head)
  explicit Net(tmod::TracedModule b) : backbone(std::move(b)) {}
  auto forward(const auto& x) const {
    auto a = x * 0.5f;
    return head(backbone.forward(a));
  }
};

inline tmod::Tensor input() { return tmod::arange(0.f, 48.f).reshape({1, 3, 4, 4}) * 0.1f; }

inline tmod::TracedModule traced_backbone() {
  Backbone b;
  b.eval();
  return tmod::trace_module(b, input());
}

/// The call expr of the graph's module node `name`.
inline const tmod::graph::Expr* call_of(const tmod::graph::Graph& g, const std::string& name) {
  for (const tmod::graph::Expr* e : g.exprs(false))
    if (e->is_module_call() && e->inputs().front()->name() == name) return e;
  FAIL("no call of " << name);
  return nullptr;
}

TEST_CASE("a traced module inside a user module traces again as a nested graph") {
  Net net(traced_backbone());
  net.eval();
  tmod::TracedModule t = tmod::trace_module(net, input());  // the default check compares with eager
  // Hand-derived: the backbone's graph is copied under Net, named after its attribute, with the
  // ids of the new hierarchy: a sub-graph's exprs, its Input exprs (self, x) first, take the ids
  // right after the call (Net_backbone's inputs are %5 and %6, Net_backbone_stem's %9 and %10).
  CHECK(text(t.graph()) ==
        "Net.Graph (self, x) {\n"
        "\t%2:\tmul_out = x.__mul__(0.5, )\n"
        "\t%3:\tbackbone = getattr(self, \"backbone\") -> (Module)\n"
        "\t%4:\tbackbone_out = backbone(mul_out, )\n"
        "\t%19:\thead = getattr(self, \"head\") -> (Conv2d)\n"
        "\t%20:\thead_out = head(backbone_out, )\n"
        "\treturn head_out\n"
        "}");
  const tmod::graph::Graph& bb = *call_of(t.graph(), "backbone")->graph();
  CHECK(text(bb) ==
        "Net_backbone.Graph (self, x) {\n"
        "\t%7:\tstem = getattr(self, \"stem\") -> (Module)\n"
        "\t%8:\tstem_out = stem(x, )\n"
        "\t%16:\tconv = getattr(self, \"conv\") -> (Conv2d)\n"
        "\t%17:\tconv_out = conv(stem_out, )\n"
        "\t%18:\tadd_out = conv_out.__add__(stem_out, )\n"
        "\treturn add_out\n"
        "}");
  CHECK(bb.top_graph() == &t.graph());
  CHECK(bb.qualname() == "Net.backbone");
  const tmod::graph::Graph& stem = *call_of(bb, "stem")->graph();
  CHECK(text(stem) ==
        "Net_backbone_stem.Graph (self, x) {\n"
        "\t%11:\tconv = getattr(self, \"conv\") -> (Conv2d)\n"
        "\t%12:\tconv_out = conv(x, )\n"
        "\t%13:\tbn = getattr(self, \"bn\") -> (BatchNorm2d)\n"
        "\t%14:\tbn_out = bn(conv_out, )\n"
        "\t%15:\trelu_out = nn.relu(bn_out, )\n"
        "\treturn relu_out\n"
        "}");
  CHECK(stem.top_graph() == &bb);
  CHECK(stem.outputs().front()->qualname() == "Net.backbone.stem.[func_relu]");
  // The nested module is the traced copy in the new tree, not the original.
  CHECK(bb.owner() == &sub(t, "backbone"));
  CHECK(bb.owner() != &net.backbone);
  // Ids are unique across the hierarchy and contiguous.
  std::vector<std::int64_t> ids;
  for (const tmod::graph::Expr* e : t.graph().exprs(true)) ids.push_back(e->id());
  for (std::size_t i = 0; i < ids.size(); ++i) CHECK(ids[i] == static_cast<std::int64_t>(i));
  CHECK(t.total_ids().second == static_cast<std::int64_t>(ids.size()));
  tmod::check(t.graph());
  // Runs like the eager composition, bit for bit (the same kernels on the same weights).
  check_identical(t(input()), net(input()));
  CHECK(t.graph().get_function_by_type(F::relu).as_count() == 1);
}

TEST_CASE("a retraced module flattens, optimizes and traces again at the top") {
  Net net(traced_backbone());
  net.eval();
  tmod::TracedModule t = tmod::trace_module(net, input());
  const tmod::Tensor expected = net(input());

  tmod::TracedModule flat = t.flatten();
  for (const tmod::graph::Expr* e : flat.graph().exprs(true)) CHECK(e->graph() == nullptr);
  check_identical(flat(input()), expected);

  tmod::TracedModule fused = tmod::optimize(flat, {"FuseConvBn"});
  CHECK(fused.graph().get_module_by_type<M::BatchNorm2d>().as_count() == 0);
  const tmod::Tensor y = fused(input());
  const auto a = y.values<float>();
  const auto b = expected.values<float>();
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-5));

  // trace_module of a TracedModule itself: its graph is copied as the top graph.
  tmod::TracedModule again = tmod::trace_module(t, input());
  CHECK(text(again.graph()) == std::string(text(t.graph())));
  check_identical(again(input()), expected);
}

/// Calls its traced module with two tensors.
struct TwoArgs : tmod::Module {
  tmod::TracedModule bb;
  TM_MODULE(TwoArgs, bb)
  explicit TwoArgs(tmod::TracedModule m) : bb(std::move(m)) {}
  auto forward(const auto& x) const { return bb.forward(x, x); }
};

/// Calls its traced module with a tensor and a number.
struct WithNumber : tmod::Module {
  tmod::TracedModule bb;
  TM_MODULE(WithNumber, bb)
  explicit WithNumber(tmod::TracedModule m) : bb(std::move(m)) {}
  auto forward(const auto& x) const { return bb.forward(x, 2); }
};

/// Passes its input straight to its traced module.
struct Direct : tmod::Module {
  tmod::TracedModule bb;
  TM_MODULE(Direct, bb)
  explicit Direct(tmod::TracedModule m) : bb(std::move(m)) {}
  auto forward(const auto& x) const { return bb.forward(x); }
};

TEST_CASE("a traced module called with other argument kinds than traced names the forms") {
  tmod::TracedModule b = traced_backbone();
  CHECK(b.traced_forms() == std::vector<std::string>{"(Tensor)"});
  // Eager: the count and the kinds.
  const std::string two = error_of<tmod::graph_error>([&] { (void)b(input(), input()); });
  CHECK(two.find("Backbone: Backbone.Graph takes 1 input, got 2: called with (Tensor, Tensor), but it was traced "
                 "for forward(Tensor)") == 0);
  const std::string kind = error_of<tmod::graph_error>([&] { (void)b(3); });
  CHECK(kind.find("called with (3), but it was traced for forward(Tensor)") != std::string::npos);

  // While tracing: the module's path and its traced forms.
  TwoArgs two_args(b);
  const std::string traced = error_of<tmod::graph_error>([&] { (void)tmod::trace_module(two_args, input()); });
  CHECK(traced.find("Backbone 'TwoArgs.bb': called with (Tensor, Tensor), but it was traced for forward(Tensor)") !=
        std::string::npos);

  // A number where the traced module's graph has a tensor input.
  WithNumber with_number(b);
  CHECK(error_of<tmod::graph_error>([&] { (void)tmod::trace_module(with_number, input()); })
            .find("called with (Tensor, 2), but it was traced for forward(Tensor)") != std::string::npos);

  // A tensor of another dtype than traced.
  Direct direct(b);
  const std::string dtype = error_of<tmod::dtype_error>(
      [&] { (void)tmod::trace_module(direct, tmod::zeros({1, 3, 4, 4}, tmod::DType::int32)); });
  CHECK(dtype.find("Backbone 'Direct.bb': input 'x' is int32, but Backbone.Graph was traced with float32") !=
        std::string::npos);
}

/// A backbone whose sub-module is called with two different non-tensor arguments (two graphs).
struct Steps : tmod::Module {
  CallsTwice steps;
  TM_MODULE(Steps, steps)
  auto forward(const auto& x) const { return steps(x) * 3; }
};

/// Holds its traced module as a dynamic attribute (setattr), reached with getattr in forward.
struct Wrapper : tmod::Module {
  M::ReLU act;
  TM_MODULE(Wrapper, act)
  auto forward(const auto& x) const { return act(getattr("inner").as<tmod::TracedModule>().forward(x)); }
};

/// Uses both outputs of a traced module with a tuple output.
struct UsesBoth : tmod::Module {
  tmod::TracedModule two;
  TM_MODULE(UsesBoth, two)
  explicit UsesBoth(tmod::TracedModule m) : two(std::move(m)) {}
  auto forward(const auto& x) const {
    auto outs = two.forward_flat(x);
    return std::tuple{outs[0] * 2.f, outs[1]};
  }
};

TEST_CASE("sub-modules traced with several signatures, a setattr attribute, named inputs") {
  Steps steps;
  const tmod::Tensor x = tmod::tensor({1.f, 2.f, 3.f});
  tmod::TracedModule inner = tmod::trace_module(steps, {{"data", x}});
  Wrapper w;
  w.setattr("inner", inner);
  tmod::TracedModule t = tmod::trace_module(w, x);
  const tmod::graph::Graph& copy = *call_of(t.graph(), "inner")->graph();
  CHECK(copy.name() == "Wrapper_inner");
  CHECK(copy.inputs()[1]->name() == "data");  // the traced graph's input names are kept
  // Both graphs of the sub-module called with 1 and with 2 are copied, each under its signature.
  const tmod::TracedModule& calls = sub(t, "inner.steps.mod");
  REQUIRE(calls.graphs().size() == 2);
  CHECK(calls.graphs()[0].first == "(Tensor, 1)");
  CHECK(calls.graphs()[1].first == "(Tensor, 2)");
  // Ids: inner %2/%3, its inputs %4-%5, steps %6/%7, inputs %8-%9, mod %10, mod(x, 1) %11 with
  // its graph %12-%14, mod(a, 2) %15 with its graph's inputs %16-%17.
  CHECK(text(*calls.graphs()[1].second) ==
        "Wrapper_inner_steps_mod_1.Graph (self, x) {\n"
        "\t%18:\tadd_out = x.__add__(2, )\n"
        "\treturn add_out\n"
        "}");
  check_identical(t(x), w(x));
  const tmod::Tensor y = t(x);
  const auto v = y.values<float>();
  CHECK(std::vector<float>(v.begin(), v.end()) == std::vector<float>{12.f, 15.f, 18.f});  // ((x + 1) + 2) * 3
  check_identical(t.flatten()(x), w(x));

  // trace_module of the traced module itself keeps its input names.
  tmod::TracedModule again = tmod::trace_module(inner, x);
  CHECK(again.graph().inputs()[1]->name() == "data");
  CHECK(text(again.graph()) == text(inner.graph()));
}

TEST_CASE("a traced module with a tuple output: forward_flat") {
  TwoOutputs two;
  const tmod::Tensor x = tmod::arange(0.f, 8.f).reshape({2, 4});
  tmod::TracedModule traced = tmod::trace_module(two, x);
  UsesBoth both(traced);
  tmod::TracedModule t = tmod::trace_module(both, x);
  const tmod::Value got = t(x);
  const auto [a, b] = both(x);
  check_identical(got[0].tensor(), a);
  check_identical(got[1].tensor(), b);
  CHECK(error_of<tmod::graph_error>([&] { (void)traced.forward(x); }).find("not one tensor") != std::string::npos);
}

TEST_CASE("insert_exprs: a traced module of the tree keeps its graph, an attached one is copied") {
  Net net(traced_backbone());
  net.eval();
  tmod::TracedModule t = tmod::trace_module(net, input());
  tmod::graph::Graph& g = t.graph();
  const tmod::graph::Graph* own = &sub(t, "backbone").graph();
  t.setattr("extra", net.backbone);  // the same weights, as a traced module the graph does not call yet
  tmod::graph::Node* mul_out = g.get_node_by_name("mul_out", true, false).as_unique();
  tmod::graph::Node* again = nullptr;
  tmod::graph::Node* extra = nullptr;
  {
    auto scope = tmod::graph::insert_exprs(g);
    again = sub(t, "backbone").forward(tmod::Sym(mul_out)).node();
    extra = t.getattr("extra").as<tmod::TracedModule>()(tmod::Sym(mul_out)).node();
  }
  tmod::graph::add_output_node(g, again);
  tmod::graph::add_output_node(g, extra);
  CHECK(again->expr()->graph() == own);  // the same graph object: nothing copied
  CHECK(&sub(t, "backbone").graph() == own);
  CHECK(extra->expr()->graph()->name() == "Net_extra");
  CHECK(extra->expr()->graph()->top_graph() == &g);
  CHECK(&sub(t, "extra").graph() == extra->expr()->graph());  // the attribute is the traced copy
  tmod::check(g);
  const tmod::Value v = t(input());
  const tmod::Tensor backbone_out = net.backbone.forward(input() * 0.5f);
  check_identical(v[0][0].tensor(), net(input()));
  check_identical(v[0][1].tensor(), backbone_out);
  check_identical(v[1].tensor(), backbone_out);  // the same weights' backbone, copied
}

TEST_CASE("a backbone traced with a dynamic batch retraces into a dynamic net that runs at any batch") {
  Backbone b;
  b.eval();
  const tmod::TraceOptions dynamic{.dynamic_dims = {{0, "N"}}};
  const Net net(tmod::trace_module(b, input(), dynamic));
  const tmod::TracedModule t = tmod::trace_module(net, input(), dynamic);
  const auto* backbone_in = static_cast<const tmod::graph::TensorNode*>(call_of(t.graph(), "backbone")->graph()->inputs()[1]);
  CHECK(backbone_in->shape_text() == "(N, 3, 4, 4)");
  CHECK(static_cast<const tmod::graph::TensorNode*>(t.graph().outputs()[0])->shape_text().starts_with("(N, 2"));
  for (const std::int64_t n : {2, 5}) {
    const tmod::Tensor x = tmod::uniform({n, 3, 4, 4}, -1.f, 1.f, 7);
    check_identical(t(x), net(x));
  }
}

TEST_CASE("a traced module inside a module traced by symbolic_trace: one call node, evaluated and lowered") {
  Net net(traced_backbone());
  net.eval();
  // The typed graph holds one opaque call of the traced module, with the shape its graph gives.
  const auto g = tmod::symbolic_trace(net, tmod::spec<1, 3, 4, 4>());
  CHECK(tmod::count_ops<tmod::TracedModule>(g) == 1);
  CHECK(g.output().shape == tmod::Shape{1, 2, 4, 4});
  check_identical(g(input()), net(input()));
  // Lowered, it is what trace_module records: the backbone's graph copied under Net, same ids.
  const tmod::TracedModule lowered = tmod::to_traced_module(g);
  const tmod::TracedModule traced = tmod::trace_module(net, input());
  CHECK(text(lowered.graph()) == text(traced.graph()));
  CHECK(text(*call_of(lowered.graph(), "backbone")->graph()) == text(*call_of(traced.graph(), "backbone")->graph()));
  tmod::check(lowered.graph());
  check_identical(lowered(input()), net(input()));

  // The call operator too, in a plain callable, with a run-time spec.
  const tmod::TracedModule bb = traced_backbone();
  const auto h = tmod::symbolic_trace([&](const auto& x) { return bb(x - 1.f); }, tmod::spec({1, 3, 4, 4}));
  CHECK(tmod::count_ops<tmod::TracedModule>(h) == 1);
  check_identical(h(input()), bb.forward(input() - 1.f));

  // symbolic_trace of the traced module itself: lowered, its own graph again, as trace_module gives it.
  const auto self = tmod::symbolic_trace(bb, tmod::spec({1, 3, 4, 4}));
  check_identical(self(input()), bb.forward(input()));
  CHECK(text(tmod::to_traced_module(self).graph()) == text(bb.graph()));

  // A static graph takes its traced shape only; the message names the module and the shapes.
  CHECK_THROWS_WITH_AS(tmod::symbolic_trace(net, tmod::spec({2, 3, 4, 4})),
                       "Backbone 'backbone': input 'x' has shape (2, 3, 4, 4), but Backbone.Graph was traced with "
                       "(1, 3, 4, 4)",
                       tmod::shape_error);
  // Two tensors where it was traced for one: the traced forms, as trace_module says.
  const TwoArgs two(traced_backbone());
  CHECK(error_of<tmod::graph_error>([&] { (void)tmod::symbolic_trace(two, tmod::spec({1, 3, 4, 4})); })
            .find("Backbone 'bb': called with (Tensor, Tensor), but it was traced for forward(Tensor)") == 0);
}

TEST_CASE("a traced module with a dynamic batch in a typed graph: its output dims at the spec's batch") {
  Backbone b;
  b.eval();
  const Net net(tmod::trace_module(b, input(), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}}));
  const auto g = tmod::symbolic_trace(net, tmod::spec({3, 3, 4, 4}));
  CHECK(g.output().shape == tmod::Shape{3, 2, 4, 4});
  const tmod::Tensor x = tmod::uniform({3, 3, 4, 4}, -1.f, 1.f, 5);
  check_identical(g(x), net(x));
  const tmod::TracedModule lowered = tmod::to_traced_module(g);
  check_identical(lowered(x), net(x));
  // Only the batch is dynamic: another channel count does not conform.
  CHECK_THROWS_WITH_AS(tmod::symbolic_trace(net, tmod::spec({3, 2, 4, 4})),
                       "Backbone 'backbone': input 'x' has shape (3, 2, 4, 4), but Backbone.Graph was traced with "
                       "(N, 3, 4, 4) (axis 1 is 2, not 3)",
                       tmod::shape_error);
}

}  // namespace tmod_test_graph_retrace
