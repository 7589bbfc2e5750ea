// optimize() on graphs traced with dynamic dims: the fused graphs keep their symbolic shapes and
// still run at other batch and image sizes, equal to the eager module.
#include "passes_test.hpp"

#include <golden.hpp>

#include <models/resnet.hpp>

#include <string>
#include <vector>

namespace tmod_test_passes_dynamic_shapes {

using namespace passes_test;

namespace {

/// conv -> bn -> relu, then a conv whose result is scaled, shifted and added to a 1x1 skip branch.
struct ConvNet : tmod::Module {
  M::Conv2d c1{3, 8, 3, {.stride = 2, .padding = 1}};
  M::BatchNorm2d bn{8};
  M::Conv2d c2{8, 8, 3, {.padding = 1}};
  M::Conv2d skip{8, 8, 1};
  TM_MODULE(ConvNet, c1, bn, c2, skip)
  auto forward(const auto& x) const {
    auto y = F::relu(bn(c1(x)));
    auto z = c2(y) * 0.5f + 1.f;
    return F::relu(z + skip(y)) * 2.f;
  }
};

const std::vector<std::string> all_passes{"FuseConvBn", "FuseAddMul", "BackwardFoldScale", "FuseConvEpilogue",
                                          "FuseElemwise"};

}  // namespace

TEST_CASE("optimize keeps a small conv net's dynamic dims: the fused graph runs at other shapes") {
  ConvNet net;
  net.eval();
  const tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 8, 8}),
                                                  tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}});
  const tmod::TracedModule opt = tmod::optimize(t, all_passes);
  CHECK(count(opt.graph(), "call:BatchNorm2d") == 0);
  // The passes fuse the dynamic graph exactly as they fuse the static trace of the same net.
  const tmod::TracedModule fixed = tmod::optimize(tmod::trace_module(net, tmod::randn({1, 3, 8, 8})), all_passes);
  CHECK(join(calls(opt.graph())) == join(calls(fixed.graph())));
  CHECK(count(opt.graph(), "nn.conv_bias_activation") == 2);
  // Each call's output is symbolic, its dims giving its example shape at the traced extents.
  for (const G::Expr* e : opt.graph().exprs(true)) {
    if (e->kind() == G::ExprKind::input || e->kind() == G::ExprKind::get_attr || e->kind() == G::ExprKind::constant)
      continue;
    for (const G::Node* n : e->outputs()) {
      const auto* t = static_cast<const G::TensorNode*>(n);
      CHECK_MESSAGE(t->is_dynamic(), n->name());
      CHECK_MESSAGE(tmod::evaluate(t->dims(), {{"N", 1}, {"H", 8}, {"W", 8}}) == t->shape(), n->name());
    }
  }
  const auto* out = static_cast<const G::TensorNode*>(opt.graph().outputs()[0]);
  CHECK(out->shape_text() == "(N, 8, (H-1)/2+1, (W-1)/2+1)");
  for (const tmod::Shape& s : {tmod::Shape{2, 3, 8, 8}, tmod::Shape{1, 3, 15, 21}, tmod::Shape{3, 3, 32, 16}}) {
    const tmod::Tensor in = tmod::randn(s);
    CHECK(golden::max_rel_err(opt(in).tensor(), net(in)) <= 1e-4);
  }
  CHECK(opt.graph().plans_built() == 1);
}

TEST_CASE("optimize on ResNet-18 with dynamic batch and image size: equal to eager at other shapes") {
  models::ResNet net(10, 8);
  net.eval();
  const tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 32, 32}),
                                                  tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}});
  const tmod::TracedModule opt = tmod::optimize(t, all_passes);
  for (const tmod::Shape& s : {tmod::Shape{3, 3, 32, 32}, tmod::Shape{1, 3, 48, 40}}) {
    const tmod::Tensor in = tmod::randn(s);
    CHECK(golden::max_rel_err(opt(in).tensor(), net(in)) <= 1e-4);
  }
}

}  // namespace tmod_test_passes_dynamic_shapes
