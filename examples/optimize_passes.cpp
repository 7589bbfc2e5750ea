// Optimization passes on small modules: each graph before and after (docs/passes.md quotes this
// output), and a pass of our own written with the pattern matcher and registered by name.
#include <tracemod/tracemod.hpp>

#include <iostream>
#include <tuple>

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
namespace P = tracemod::passes;

/// MegEngine's FuseAddMul example: x * scale[0]; 3 * x; 3 + x; x - scale[1] with scale = [1, 2].
struct AddMul : tmod::Module {
  tmod::Parameter scale0{tmod::tensor({1.f})};
  tmod::Parameter scale1{tmod::tensor({2.f})};
  TM_MODULE(AddMul, scale0, scale1)
  auto forward(const auto& x) const {
    auto a = x * scale0;
    auto b = 3.f * a;
    auto c = 3.f + b;
    return c - scale1;
  }
};

/// MegEngine's FuseConvBn example: a conv used twice, followed by the same batch norm.
struct ConvTwice : tmod::Module {
  M::Conv2d conv_0{3, 4, 3, {.padding = 1}};
  M::BatchNorm2d bn_0{4};
  TM_MODULE(ConvTwice, conv_0, bn_0)
  auto forward(const auto& x1, const auto& x2) const {
    auto x = conv_0(x1);
    auto y1 = bn_0(x);
    auto x_ = conv_0(x2);
    auto y2 = bn_0(x_);
    return std::make_tuple(y1, y2);
  }
};

/// MegEngine's BackwardFoldScale docstring.
struct FoldScale : tmod::Module {
  tmod::Parameter w{tmod::randn({4, 4, 3, 3}, 1)};
  tmod::Parameter b{tmod::randn({4}, 2)};
  TM_MODULE(FoldScale, w, b)
  auto forward(const auto& x) const {
    auto c = F::conv2d(x, w, b, {.padding = 1});
    auto r = F::relu(c);
    auto x1 = r + 3.f;
    auto x2 = r + 4.f;
    auto s = x1 + x2;
    return s * 3.f;
  }
};

/// A ResNet basic block: the conv epilogues (bias, residual add, relu) join the convs.
struct Block : tmod::Module {
  M::Conv2d conv1{4, 4, 3, {.padding = 1, .bias = false}};
  M::BatchNorm2d bn1{4};
  M::ReLU relu;
  M::Conv2d conv2{4, 4, 3, {.padding = 1, .bias = false}};
  M::BatchNorm2d bn2{4};
  TM_MODULE(Block, conv1, bn1, relu, conv2, bn2)
  auto forward(const auto& x) const {
    auto a = relu(bn1(conv1(x)));
    auto b = bn2(conv2(a));
    return relu(b + x);
  }
};

/// An elementwise chain: one fused pass.
struct Chain : tmod::Module {
  TM_MODULE(Chain)
  auto forward(const auto& x) const { return F::relu(x * 0.5f + 1.f); }
};

/// relu6(relu(x)) is relu6(x): a pass of our own.
struct ReluRelu6 : tmod::Module {
  TM_MODULE(ReluRelu6)
  auto forward(const auto& x) const { return F::relu6(F::relu(x)) + 1.f; }
};

void show(const char* title, const tmod::TracedModule& before, const tmod::TracedModule& after) {
  std::cout << "---- " << title << " ----\nbefore:\n" << before.graph() << "\nafter:\n" << after.graph() << "\n\n";
}

int main() {
  const tmod::Tensor x = tmod::randn({1, 4, 6, 6}, 3);

  AddMul add_mul;
  tmod::TracedModule t1 = tmod::trace_module(add_mul, x);
  show("FuseAddMul", t1, tmod::optimize(t1, {"FuseAddMul"}));

  ConvTwice twice;
  twice.eval();
  const tmod::Tensor x1 = tmod::randn({1, 3, 6, 6}, 4), x2 = tmod::randn({1, 3, 6, 6}, 5);
  tmod::TracedModule t2 = tmod::trace_module(twice, x1, x2);
  show("FuseConvBn", t2, tmod::optimize(t2, {"FuseConvBn"}));

  FoldScale fold;
  tmod::TracedModule t3 = tmod::trace_module(fold, x);
  show("BackwardFoldScale", t3, tmod::optimize(t3, {"BackwardFoldScale"}));

  Block block;
  block.eval();
  tmod::TracedModule t5 = tmod::trace_module(block, x);
  show("FuseConvEpilogue", t5, tmod::optimize(t5, {"FuseConvEpilogue"}));

  Chain chain;
  tmod::TracedModule t6 = tmod::trace_module(chain, x);
  show("FuseElemwise", t6, tmod::optimize(t6, {"FuseElemwise"}));

  // A pass: match relu6(relu(x)) where the relu has no other user, call relu6 on x instead.
  tmod::register_pass({.name = "DropReluBeforeRelu6", .run = [](tmod::graph::Graph& g) {
                         const P::Pattern x = P::any_node();
                         const P::Pattern relu = P::is_op(F::relu)(x);
                         const P::Pattern pattern = P::is_op(F::relu6)(relu);
                         return P::rewrite_backward(g, [&](tmod::graph::Expr& e) -> tmod::graph::Expr* {
                           P::PatternMatcher m;
                           if (!m.match(pattern, e)) return nullptr;
                           tmod::graph::Node* input = m[relu]->inputs().front();
                           tmod::graph::Node* out = nullptr;
                           {
                             P::Builder b(g, e);  // new exprs go right before e
                             out = b.call(F::entry_of(F::relu6), {input});
                           }
                           P::replace_and_erase(g, e.output(), out);  // out takes e's output name
                           return out->expr();
                         });
                       }});
  ReluRelu6 relu;
  tmod::TracedModule t4 = tmod::trace_module(relu, x);
  show("DropReluBeforeRelu6 (a user pass)", t4, tmod::optimize(t4, {"DropReluBeforeRelu6"}));
}
