// Lowering typed graphs (tmod::to_traced_module): the TracedModule must be the one trace_module builds
// for the same module (every graph printed by name and by id, node qualnames, ids), run to the same
// output as eager mode, and pass tmod::check. Hand-written listings pin the format independently.
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/constant.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>
#include <tracemod/graph/wrap.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <tuple>

namespace tmod_test_graph_lowering {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

/// The example of DESIGN.md.
struct SimpleModule : tmod::Module {
  M::Linear linear{4, 5};
  tmod::Parameter param{tmod::tensor({1.f})};
  TM_MODULE(SimpleModule, linear, param)
  auto forward(const auto& x) const {
    auto a = x + tmod::constant({1.f});
    auto r = F::relu(a);
    return linear(r + param);
  }
};

/// A call used twice, and scalars of each C++ type.
struct Shared : tmod::Module {
  TM_MODULE(Shared)
  auto forward(const auto& x) const {
    auto a = F::relu(x);
    auto b = a * 2;
    auto c = a + b;
    auto d = c * 0.1;
    auto e = d - 1.5f;
    return e * tmod::c<1, 4>;
  }
};

/// A user module with two outputs.
struct Split : tmod::Module {
  TM_MODULE(Split)
  auto forward(const auto& x) const { return std::tuple{F::relu(x), x * 3}; }
};

struct Inner : tmod::Module {
  M::Linear fc{4, 4};
  TM_MODULE(Inner, fc)
  auto forward(const auto& x) const { return fc(x); }
};

/// A scale chain that tmod::simplify folds into one multiplication.
struct Chain : tmod::Module {
  TM_MODULE(Chain)
  auto forward(const auto& x) const {
    auto a = x * 2;
    return a * 3;
  }
};

/// A multi-output call, a user module called twice the same way (one graph), a builtin module called
/// twice, and a diamond of shared calls.
struct Reuse : tmod::Module {
  Split split;
  Inner inner;
  M::ReLU act;
  TM_MODULE(Reuse, split, inner, act)
  auto forward(const auto& x) const {
    auto parts = split(x);
    auto y = inner(std::get<0>(parts));
    auto z = inner(std::get<1>(parts));
    auto s = act(y) + act(z);
    auto t = s + s;
    auto u = t + t;
    return std::tuple{u + u, y};
  }
};

/// Every graph of both modules prints the same, by name and with ids, and every node has the same
/// qualname.
void check_same(const tmod::TracedModule& lowered, const tmod::TracedModule& traced) {
  const auto a = lowered.graph().graphs(true);
  const auto b = traced.graph().graphs(true);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(tmod::graph::to_string(*a[i]) == tmod::graph::to_string(*b[i]));
    CHECK(tmod::format_ids(*a[i]) == tmod::format_ids(*b[i]));
  }
  const auto na = lowered.graph().nodes(true).as_list();
  const auto nb = traced.graph().nodes(true).as_list();
  REQUIRE(na.size() == nb.size());
  for (std::size_t i = 0; i < na.size(); ++i) CHECK(na[i]->qualname() == nb[i]->qualname());
  CHECK(lowered.total_ids() == traced.total_ids());
  CHECK(lowered.is_top());
  tmod::check(lowered.graph());
}

void check_bitwise(const tmod::Tensor& a, const tmod::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  CHECK(std::ranges::equal(a.values<float>(), b.values<float>()));
}

/// A wrapped function of two tensors, counting its eager runs (a typed graph must run it as one call).
int clipped_sum_runs = 0;
const auto clipped_sum = tmod::wrap<2>("clipped_sum", [](const auto& a, const auto& b) {
  if constexpr (std::same_as<std::remove_cvref_t<decltype(a)>, tmod::Tensor>) ++clipped_sum_runs;
  return F::minimum(F::relu(a + b), 6.f);
});

/// A module calling the wrapped function between ordinary ops.
struct Wrapping : tmod::Module {
  TM_MODULE(Wrapping)
  auto forward(const auto& x) const {
    auto a = x * 2;
    auto b = clipped_sum(a, x);
    return F::neg(b);
  }
};

}  // namespace

TEST_CASE("lowering: DESIGN.md's SimpleModule prints as documented and as trace_module") {
  SimpleModule m;
  const tmod::TracedModule lowered = tmod::to_traced_module(tmod::symbolic_trace(m, tmod::spec({3, 4})));
  CHECK(tmod::graph::to_string(lowered.graph()) ==
        "SimpleModule.Graph (self, x) {\n"
        "\t%2:\tconst_tensor = Constant(Tensor) -> (Tensor)\n"
        "\t%3:\tadd_out = x.__add__(const_tensor, )\n"
        "\t%4:\trelu_out = nn.relu(add_out, )\n"
        "\t%5:\tparam = getattr(self, \"param\") -> (Tensor)\n"
        "\t%6:\tadd_out_1 = relu_out.__add__(param, )\n"
        "\t%7:\tlinear = getattr(self, \"linear\") -> (Linear)\n"
        "\t%8:\tlinear_out = linear(add_out_1, )\n"
        "\treturn linear_out\n"
        "}");
  CHECK(tmod::format_ids(lowered.graph()).find("%8:\t%8_linear_out = %7_linear(%6_add_out_1, )") != std::string::npos);
  const tmod::Tensor x = tmod::randn({3, 4}, 1);
  check_same(lowered, tmod::trace_module(m, x));
  tmod::TracedModule run = lowered;
  check_bitwise(run(x), m(x));
}

TEST_CASE("lowering: a shared call becomes one expr; scalars print with their C++ type") {
  Shared m;
  const tmod::TracedModule lowered = tmod::to_traced_module(tmod::symbolic_trace(m, tmod::spec({2, 3}, tmod::DType::float32, "image")));
  CHECK(tmod::graph::to_string(lowered.graph()) ==
        "Shared.Graph (self, image) {\n"
        "\t%2:\trelu_out = nn.relu(image, )\n"
        "\t%3:\tmul_out = relu_out.__mul__(2, )\n"
        "\t%4:\tadd_out = relu_out.__add__(mul_out, )\n"
        "\t%5:\tmul_out_1 = add_out.__mul__(0.1, )\n"
        "\t%6:\tsub_out = mul_out_1.__sub__(1.5, )\n"
        "\t%7:\tmul_out_2 = sub_out.__mul__(0.25, )\n"
        "\treturn mul_out_2\n"
        "}");
  CHECK(lowered.graph().get_node_by_name("relu_out").as_unique()->users().size() == 2);
  const tmod::Tensor x = tmod::randn({2, 3}, 2);
  check_same(tmod::to_traced_module(tmod::symbolic_trace(m, tmod::spec({2, 3}))), tmod::trace_module(m, x));
  tmod::TracedModule run = lowered;
  check_bitwise(run(x), m(x));
}

TEST_CASE("lowering: multi-output calls, one graph per call signature, shared diamonds") {
  Reuse m;
  const tmod::TracedModule lowered = tmod::to_traced_module(tmod::symbolic_trace(m, tmod::spec({2, 4})));
  const tmod::TracedModule traced = tmod::trace_module(m, tmod::randn({2, 4}, 3));
  check_same(lowered, traced);
  const tmod::graph::Graph& g = lowered.graph();
  // split, inner twice, act twice, 1 + 2 + 2 + 1 adds: each once, in the order the ops ran.
  CHECK(g.get_method_by_type("__call__", false).as_count() == 5);
  CHECK(g.get_method_by_type("__add__", false).as_count() == 4);
  const auto inner_calls = g.exprs(false).where([](const tmod::graph::Expr* e) {
    return e->is_module_call() && e->inputs().front()->name() == "inner";
  }).as_list();
  REQUIRE(inner_calls.size() == 2);
  CHECK(inner_calls[0]->graph() == inner_calls[1]->graph());
  CHECK(lowered.getattr("inner").as<tmod::TracedModule>().graphs().size() == 1);
  const auto split_call = g.exprs(false).where([](const tmod::graph::Expr* e) {
    return e->is_module_call() && e->inputs().front()->name() == "split";
  }).as_unique();
  CHECK(split_call->output_count() == 2);
  CHECK(g.outputs().size() == 2);
  const tmod::Tensor x = tmod::randn({2, 4}, 4);
  tmod::TracedModule run = lowered;
  const tmod::Value out = run(x);
  const auto [u, y] = m(x);
  check_bitwise(out[0].tensor(), u);
  check_bitwise(out[1].tensor(), y);
}

TEST_CASE("lowering: ResNet-18 lowers to trace_module's TracedModule (width 8 and full width)") {
  for (const std::int64_t width : {8, 64}) {
    CAPTURE(width);
    models::ResNet m = models::resnet18(10, width);
    m.eval();
    const tmod::Tensor x = tmod::randn({1, 3, 32, 32}, 5);
    tmod::TracedModule lowered = tmod::to_traced_module(tmod::symbolic_trace(m, tmod::spec({1, 3, 32, 32})));
    tmod::TracedModule traced = tmod::trace_module(m, x);
    check_same(lowered, traced);
    CHECK(lowered.getattr("layer2").as<tmod::TracedModule>().graph().name() == "ResNet_layer2");
    check_bitwise(lowered(x), traced(x));
    check_bitwise(lowered(x), m(x));
  }
}

TEST_CASE("lowering: a simplified graph lowers its rewritten calls; folded scalars are floats") {
  Chain m;
  const auto g = tmod::simplify(tmod::symbolic_trace(m, tmod::spec({2})));
  const tmod::TracedModule lowered = tmod::to_traced_module(g);
  CHECK(tmod::graph::to_string(lowered.graph()) ==
        "Chain.Graph (self, x) {\n"
        "\t%2:\tmul_out = x.__mul__(6.0, )\n"
        "\treturn mul_out\n"
        "}");
  tmod::check(lowered.graph());
  tmod::TracedModule run = lowered;
  const tmod::Tensor x = tmod::tensor({1.5f, -2.f});
  check_bitwise(run(x), g(x));
}

TEST_CASE("lowering: a graph traced from a lambda has no module tree and is rejected") {
  const auto g = tmod::symbolic_trace([](const auto& x) { return F::relu(x) * 2; }, tmod::spec({2}));
  CHECK_THROWS_AS(tmod::to_traced_module(g), tmod::graph_error);
  CHECK_THROWS_WITH(tmod::to_traced_module(g), doctest::Contains("plain callable"));
}

TEST_CASE("lowering: a tmod::wrap function is one node of its own op type in the typed graph") {
  Wrapping m;
  const auto g = tmod::symbolic_trace(m, tmod::spec({2, 3}));
  using graph_type = std::remove_cvref_t<decltype(g)>;
  using clipped_sum_op = tmod::wrapped_op_t<decltype(clipped_sum)>;
  static_assert(tmod::count_ops<clipped_sum_op, graph_type>() == 1);
  static_assert(tmod::count_ops<F::relu_fn, graph_type>() == 0, "the wrapped function's own ops are not traced");
  static_assert(tmod::count_ops<F::neg_fn, graph_type>() == 1);

  // Evaluated as the function itself, once, with the bits of the eager module.
  const tmod::Tensor x = tmod::randn({2, 3}, 4) * 5.f;
  const int runs_before = clipped_sum_runs;
  const tmod::Tensor y = g(x);
  CHECK(clipped_sum_runs == runs_before + 1);
  const tmod::Tensor expected = F::neg(F::minimum(F::relu(x * 2 + x), 6.f));
  check_bitwise(y, expected);

  // Lowered: one CallFunction printed with the function's name, as trace_module records it.
  const tmod::TracedModule lowered = tmod::to_traced_module(g);
  CHECK(tmod::graph::to_string(lowered.graph()) ==
        "Wrapping.Graph (self, x) {\n"
        "\t%2:\tmul_out = x.__mul__(2, )\n"
        "\t%3:\tclipped_sum_out = clipped_sum(mul_out, x, )\n"
        "\t%4:\tneg_out = elemwise.neg(clipped_sum_out, )\n"
        "\treturn neg_out\n"
        "}");
  check_same(lowered, tmod::trace_module(m, x));
  tmod::TracedModule run = lowered;
  check_bitwise(run(x), expected);
}

}  // namespace tmod_test_graph_lowering
