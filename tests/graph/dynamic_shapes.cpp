// Symbolic dimensions: DimExpr's algebra and printing, tracing with TraceOptions::dynamic_dims,
// graphs that run at other batch and image sizes equal to eager mode (one plan for all shapes),
// and the errors for inputs that do not conform.
#include "graph_test.hpp"

#include <golden.hpp>

#include <models/resnet.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace tmod_test_graph_dynamic_shapes {

using namespace graph_test;

namespace {

/// conv (stride 2) -> bn -> relu -> maxpool -> conv -> residual add of a 1x1 stride-1 conv -> relu.
struct SmallNet : tmod::Module {
  M::Conv2d c1{3, 8, 3, {.stride = 2, .padding = 1}};
  M::BatchNorm2d bn{8};
  M::ReLU relu;
  M::MaxPool2d pool{3, {.stride = 2, .padding = 1}};
  M::Conv2d c2{8, 8, 3, {.padding = 1}};
  M::Conv2d skip{8, 8, 1};
  TM_MODULE(SmallNet, c1, bn, relu, pool, c2, skip)
  auto forward(const auto& x) const {
    auto y = pool(relu(bn(c1(x))));
    return F::relu(c2(y) + skip(y));
  }
};

/// Every tensor node's dims give its example shape at the example extents of the symbols.
void check_dims_match_examples(const tmod::graph::Graph& g, const tmod::DimBinding& example) {
  for (const tmod::graph::Node* n : g.nodes(true).as_list()) {
    if (!n->is_tensor()) continue;
    const auto* t = static_cast<const tmod::graph::TensorNode*>(n);
    CHECK_MESSAGE(tmod::evaluate(t->dims(), example) == t->shape(), std::string(n->name() + " " + t->shape_text()));
  }
}

struct TwoInputs : tmod::Module {
  TM_MODULE(TwoInputs)
  auto forward(const auto& x, const auto& y) const { return x * y + 1; }
};

struct ReshapeNet : tmod::Module {
  M::Linear fc{48, 5};
  TM_MODULE(ReshapeNet, fc)
  auto forward(const auto& x) const {
    auto a = fc(F::reshape(x, {-1, 48}));
    auto b = fc(F::flatten(x, 1));
    return a + b;
  }
};

}  // namespace

TEST_CASE("DimExpr: simplification, structural equality, evaluation and printing") {
  const tmod::DimExpr h = tmod::DimExpr::symbol("H"), n = tmod::DimExpr::symbol("N");
  const auto conv = [](const tmod::DimExpr& x, int k, int s, int p) { return tmod::window_extent(x, k, s, p, 1); };
  CHECK(conv(h, 3, 1, 1) == h);  // a "same" convolution keeps the extent
  CHECK(conv(h, 7, 2, 3).to_string() == "(H-1)/2+1");
  CHECK(conv(conv(h, 7, 2, 3), 3, 2, 1).to_string() == "(H-1)/4+1");  // (x/2)/2 = x/4
  CHECK(conv(conv(h, 3, 2, 1), 3, 2, 1) == conv(conv(h, 1, 2, 0), 3, 2, 1));
  CHECK((h + 0) == h);
  CHECK((h * 1) == h);
  CHECK((h / 1) == h);
  CHECK((h * 64 / 64) == h);
  CHECK((n * 64 * h / 64).to_string() == "N*H");
  CHECK((h - h) == tmod::DimExpr(0));
  CHECK((h + 2 - 3).to_string() == "H-1");
  CHECK(!(h == n));
  CHECK((n * (h - 1)).to_string() == "N*(H-1)");
  CHECK((h - (n - 1)).to_string() == "H-(N-1)");
  CHECK(((n + h) / (n * 2)).to_string() == "(N+H)/(N*2)");
  CHECK(tmod::ceil_div(h, 2).to_string() == "ceildiv(H, 2)");
  CHECK(tmod::to_string(tmod::Dims{n, 3, h, h}) == "(N, 3, H, H)");
  CHECK(tmod::to_string(tmod::Dims{n}) == "(N,)");
  const tmod::DimBinding b{{"H", 33}, {"N", 2}};
  CHECK(conv(conv(h, 7, 2, 3), 3, 2, 1).evaluate(b) == 9);
  CHECK(tmod::ceil_div(h, 2).evaluate(b) == 17);
  CHECK(tmod::evaluate(tmod::Dims{n, 64, h / 2}, b) == tmod::Shape{2, 64, 16});
  CHECK_THROWS_AS((void)(h + tmod::DimExpr::symbol("W")).evaluate(b), tmod::shape_error);
  CHECK_THROWS_AS((void)(h / 0), tmod::shape_error);
}

TEST_CASE("trace_module with dynamic N, H, W: symbolic shapes, one plan, equal to eager at other shapes") {
  SmallNet net;
  net.eval();
  tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 8, 8}),
                                            tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}});
  const auto* x = static_cast<const tmod::graph::TensorNode*>(t.graph().inputs()[1]);
  CHECK(x->is_dynamic());
  CHECK(x->shape() == tmod::Shape{1, 3, 8, 8});  // the example shape stays
  CHECK(x->shape_text() == "(N, 3, H, W)");
  const auto* out = static_cast<const tmod::graph::TensorNode*>(t.graph().outputs()[0]);
  CHECK(out->shape_text() == "(N, 8, (H-1)/4+1, (W-1)/4+1)");
  CHECK(text(t.graph()).starts_with("SmallNet.Graph (self, x: (N, 3, H, W)) {\n"));
  check_dims_match_examples(t.graph(), {{"N", 1}, {"H", 8}, {"W", 8}});
  for (const tmod::Shape& s : {tmod::Shape{1, 3, 8, 8}, tmod::Shape{3, 3, 17, 9}, tmod::Shape{2, 3, 32, 31}}) {
    const tmod::Tensor in = tmod::randn(s);
    CHECK(golden::max_rel_err(t(in).tensor(), net(in)) <= 1e-4);
  }
  CHECK(t.graph().plans_built() == 1);
}

TEST_CASE("a static trace keeps static nodes and refuses other shapes as before") {
  SmallNet net;
  net.eval();
  tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 8, 8}));
  for (const tmod::graph::Node* n : t.graph().nodes(true).as_list())
    if (n->is_tensor()) CHECK(!static_cast<const tmod::graph::TensorNode*>(n)->is_dynamic());
  CHECK(text(t.graph()).starts_with("SmallNet.Graph (self, x) {\n"));
  CHECK_THROWS_WITH_AS(t(tmod::randn({2, 3, 8, 8})), doctest::Contains("but the graph was traced with"), tmod::shape_error);
}

TEST_CASE("dynamic inputs that do not conform: rank, a static extent, a symbol bound twice") {
  SmallNet net;
  net.eval();
  tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 8, 8}),
                                            tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}});
  CHECK_THROWS_WITH_AS(t(tmod::randn({1, 3, 8})),
                       "SmallNet.Graph: input 'x' has shape (1, 3, 8), which does not conform to (N, 3, H, W): rank 3 "
                       "instead of 4",
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS(t(tmod::randn({2, 4, 8, 8})),
                       "SmallNet.Graph: input 'x' has shape (2, 4, 8, 8), which does not conform to (N, 3, H, W): axis "
                       "1 is 4, not 3",
                       tmod::shape_error);

  TwoInputs two;
  tmod::TracedModule u = tmod::trace_module(two, tmod::randn({2, 3}), tmod::randn({2, 3}),
                                            tmod::TraceOptions{.dynamic_dims = {{0, "batch"}}});
  CHECK(text(u.graph()).starts_with("TwoInputs.Graph (self, x: (batch, 3), x_1: (batch, 3)) {"));
  const tmod::Tensor a = tmod::randn({5, 3}), b = tmod::randn({5, 3});
  CHECK(golden::max_rel_err(u(a, b).tensor(), two(a, b)) == 0);
  CHECK_THROWS_WITH_AS(u(tmod::randn({5, 3}), tmod::randn({4, 3})),
                       "TwoInputs.Graph: input 'x_1' has shape (4, 3), which does not conform to (batch, 3): axis 0 is 4, "
                       "but 'batch' is 5 in this call (inputs sharing a symbol must agree)",
                       tmod::shape_error);
  CHECK(u.graph().plans_built() == 1);

  // Trace-time misuse: a symbol with two example extents; an axis the named input does not have.
  CHECK_THROWS_AS(tmod::trace_module(two, tmod::randn({2, 3}), tmod::randn({4, 3}),
                                     tmod::TraceOptions{.dynamic_dims = {{0, "batch"}}}),
                  tmod::value_error);
  CHECK_THROWS_AS(tmod::trace_module(two, tmod::randn({2, 3}), tmod::randn({2, 3}),
                                     tmod::TraceOptions{.dynamic_dims = {{2, "C", 1}}}),
                  tmod::value_error);
}

TEST_CASE("broadcasting a symbolic extent: against 1 it stays, against a static extent the static one wins") {
  TwoInputs two;
  // y's axis 0 is 1: the product keeps x's symbol.
  tmod::TracedModule t = tmod::trace_module(two, tmod::randn({2, 3}), tmod::randn({1, 3}),
                                            tmod::TraceOptions{.dynamic_dims = {{0, "batch", 0}}});
  CHECK(static_cast<const tmod::graph::TensorNode*>(t.graph().outputs()[0])->shape_text() == "(batch, 3)");
  const tmod::Tensor a = tmod::randn({6, 3}), b = tmod::randn({1, 3});
  CHECK(golden::max_rel_err(t(a, b).tensor(), two(a, b)) == 0);
  // y's axis 0 is static 2: the result is 2, and another batch fails in the kernel's own check.
  tmod::TracedModule u = tmod::trace_module(two, tmod::randn({2, 3}), tmod::randn({2, 3}),
                                            tmod::TraceOptions{.dynamic_dims = {{0, "batch", 0}}});
  CHECK(static_cast<const tmod::graph::TensorNode*>(u.graph().outputs()[0])->shape_text() == "(2, 3)");
  CHECK_THROWS_AS(u(tmod::randn({3, 3}), tmod::randn({2, 3})), tmod::shape_error);
}

TEST_CASE("reshape with -1 and flatten follow a dynamic batch") {
  ReshapeNet net;
  tmod::TracedModule t =
      tmod::trace_module(net, tmod::randn({2, 3, 4, 4}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  std::vector<std::string> shapes;
  for (const tmod::graph::Node* n : t.graph().nodes(false).as_list())
    if (n->is_tensor() && static_cast<const tmod::graph::TensorNode*>(n)->is_dynamic())
      shapes.push_back(n->name() + " " + static_cast<const tmod::graph::TensorNode*>(n)->shape_text());
  CHECK(shapes == std::vector<std::string>{"x (N, 3, 4, 4)", "reshape_out (N, 48)", "fc_out (N, 5)",
                                           "flatten_out (N, 48)", "fc_out_1 (N, 5)", "add_out (N, 5)"});
  const tmod::Tensor in = tmod::randn({7, 3, 4, 4});
  CHECK(golden::max_rel_err(t(in).tensor(), net(in)) == 0);
}

TEST_CASE("ResNet-18 with dynamic batch and image size equals eager at batch 1 and 3, 32x32 and 48x40") {
  models::ResNet net(10, 8);  // ResNet-18's structure at a narrow width: cheap
  net.eval();
  tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 32, 32}),
                                            tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}});
  CHECK(static_cast<const tmod::graph::TensorNode*>(t.graph().outputs()[0])->shape_text() == "(N, 10)");
  check_dims_match_examples(t.graph(), {{"N", 1}, {"H", 32}, {"W", 32}});
  for (const tmod::Shape& s : {tmod::Shape{1, 3, 32, 32}, tmod::Shape{3, 3, 48, 40}, tmod::Shape{1, 3, 48, 40}}) {
    const tmod::Tensor in = tmod::randn(s);
    CHECK(golden::max_rel_err(t(in).tensor(), net(in)) <= 1e-4);
  }
  CHECK(t.graph().plans_built() == 1);
}

/// getitem, stack, astype and the powers on a dynamic batch.
struct IndexStackNet : tmod::Module {
  TM_MODULE(IndexStackNet)
  auto forward(const auto& x) const {
    auto head = F::getitem(x, tmod::all, tmod::slice(1, 3));  // (N, 2, 4)
    auto tail = F::getitem(x, tmod::slice(1, tmod::none), 0);  // (N-1, 4)
    auto both = F::stack(std::make_tuple(F::square(head), F::rsqrt(F::pow(head, 2) + 1.f)), 1);  // (N, 2, 2, 4)
    return std::make_tuple(both, F::astype(F::astype(tail, tmod::int32), tmod::float32));
  }
};

struct BoundedSlice : tmod::Module {
  TM_MODULE(BoundedSlice)
  auto forward(const auto& x) const { return F::getitem(x, tmod::slice(0, 2)); }
};

TEST_CASE("getitem, stack, astype and the powers follow a dynamic batch; a bounded slice of it needs a static one") {
  IndexStackNet net;
  tmod::TracedModule t = tmod::trace_module(net, tmod::randn({3, 4, 4}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  const std::vector<tmod::graph::Node*> outs = t.graph().outputs();
  CHECK(static_cast<const tmod::graph::TensorNode*>(outs[0])->shape_text() == "(N, 2, 2, 4)");
  CHECK(static_cast<const tmod::graph::TensorNode*>(outs[1])->shape_text() == "(N-1, 4)");
  for (std::int64_t n : {1, 5}) {
    const tmod::Tensor x = tmod::randn({n, 4, 4}, 7);
    const auto [both, tail] = net(x);
    const tmod::Value y = t(x);
    CHECK(golden::max_rel_err(y[0].tensor(), both) == 0);
    CHECK(golden::max_rel_err(y[1].tensor(), tail) == 0);
  }
  BoundedSlice bounded;
  CHECK_THROWS_WITH_AS(tmod::trace_module(bounded, tmod::randn({3, 4}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}}),
                       doctest::Contains("need a static extent"), tmod::shape_error);
}

}  // namespace tmod_test_graph_dynamic_shapes
