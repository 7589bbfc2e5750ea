// Tracing modules: parameters read through the module (GetAttr), builtin modules as opaque calls
// counted under their module type, user modules as nested sub-graphs, and fused evaluation against
// the module's eager forward. Builtin module calls and user-module sub-graphs are evaluation
// boundaries, so no product meets an addition across them: results equal eager mode exactly.
#include <golden.hpp>
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/trace.hpp>

#include <boost/hana/at.hpp>
#include <boost/hana/equal.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <doctest/doctest.h>

#include <tuple>
#include <type_traits>

namespace tmod_test_trace_modules {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
namespace hana = boost::hana;

template <class... Op>
constexpr auto ops = hana::make_tuple(hana::type_c<Op>...);

struct Block : tmod::Module {
  M::Linear fc{4, 4};
  M::ReLU act;
  tmod::Parameter scale{tmod::tensor({2.f, 1.f, 0.5f, 3.f})};
  TM_MODULE(Block, fc, act, scale)

  auto forward(const auto& x) const { return act(fc(x) * scale); }
};

struct Net : tmod::Module {
  Block block;
  M::Linear head{4, 3};
  tmod::Parameter bias{tmod::tensor({0.1f, -0.2f, 0.3f, 0.f})};
  TM_MODULE(Net, block, head, bias)

  auto forward(const auto& x) const {
    const auto h = block(x + bias);
    const auto r = F::relu(h) - 1.f;
    return head(r);
  }
};

/// A user module with two outputs.
struct Split : tmod::Module {
  TM_MODULE(Split)
  auto forward(const auto& x) const { return std::tuple{F::relu(x), -x}; }
};

struct UsesSplit : tmod::Module {
  Split split;
  M::Linear fc{3, 3};
  TM_MODULE(UsesSplit, split, fc)

  auto forward(const auto& x) const {
    const auto [pos, neg] = split(x);
    return fc(pos) + neg;
  }
};

/// A sub-graph with rewrite opportunities, called with one.
struct Scaled : tmod::Module {
  TM_MODULE(Scaled)
  auto forward(const auto& x) const { return F::relu(F::relu(x * 2.f * 4.f)); }
};

struct Outer : tmod::Module {
  Scaled inner;
  TM_MODULE(Outer, inner)
  auto forward(const auto& x) const { return inner(x + tmod::c<0>); }
};

}  // namespace

TEST_CASE("modules: queries see builtin calls, attributes and the user sub-graph") {
  tmod::manual_seed(1);
  const Net net;
  const auto g = tmod::symbolic_trace(net, tmod::spec({2, 4}));
  // Top graph: x + bias, block(.), relu, - 1, head(.); block's sub-graph: fc, * scale, act.
  static_assert(tmod::ops_of(g) == ops<F::method_add_fn, M::Linear, F::method_mul_fn, M::ReLU, F::relu_fn,
                                       F::method_sub_fn, M::Linear>);
  static_assert(tmod::count_ops<M::Linear>(g) == 2);
  static_assert(tmod::count_ops<M::ReLU>(g) == 1 && tmod::count_ops<F::relu_fn>(g) == 1);
  // x, bias, add, the block call (1 + its sub-graph: input, fc, scale, mul, act), relu, sub, head.
  static_assert(tmod::node_count(g) == 12);
  CHECK(tmod::node_count(g) == 12);

  constexpr auto subs = tmod::submodules_of(g);
  static_assert(hana::length(subs) == hana::size_c<1>);
  using call = typename decltype(+hana::at_c<0>(subs))::type;
  static_assert(std::same_as<typename call::module_type, Block>);

  // Names come from the module's reflection, relative to the module whose forward is traced.
  const auto& head_call = g.output();
  CHECK(head_call.name == "head");
  CHECK(head_call.module == &net.head);
  const auto& relu_sub = std::get<0>(head_call.args);    // relu(h) - 1
  const auto& relu = std::get<0>(relu_sub.args);         // relu(h)
  const auto& block_call = std::get<0>(relu.args);       // block(x + bias)
  CHECK(block_call.name == "block");
  CHECK(std::get<1>(std::get<0>(block_call.args).args).name == "bias");
  const auto& act_call = block_call.graph.output();
  CHECK(act_call.name == "act");
  const auto& scale_read = std::get<1>(std::get<0>(act_call.args).args);
  CHECK(scale_read.name == "scale");
  CHECK(block_call.graph.call_count() == 3);  // fc, mul, act: ids of the sub-graph's own calls
  CHECK(tmod::count_ops<M::Linear>(block_call.graph) == 1);
}

TEST_CASE("modules: fused evaluation equals the eager forward") {
  tmod::manual_seed(2);
  Net net;
  const auto g = tmod::symbolic_trace(net, tmod::spec({5, 4}));
  const tmod::Tensor x = tmod::randn({5, 4}, 3);
  golden::check_close(g(x), net(x), 0.0, 0.0, "Net");

  // Attributes are read at evaluation time, through the module's own buffers.
  net.bias.data<float>()[1] = 4.f;
  net.block.scale.data<float>()[2] = -1.f;
  golden::check_close(g(x), net(x), 0.0, 0.0, "Net after changing parameters in place");
}

TEST_CASE("modules: a user module with several outputs") {
  tmod::manual_seed(3);
  const UsesSplit m;
  const auto g = tmod::symbolic_trace(m, tmod::spec({2, 3}));
  // Queries walk the tree: each output of the call (used once each here) carries the call, so its
  // sub-graph is seen once per output used, as a shared value is seen once per use.
  static_assert(tmod::ops_of(g) ==
                ops<F::relu_fn, F::method_neg_fn, M::Linear, F::relu_fn, F::method_neg_fn, F::method_add_fn>);
  static_assert(hana::length(tmod::submodules_of(g)) == hana::size_c<2>);
  const auto& [fc_call, neg_output] = g.output().args;
  CHECK(std::get<0>(fc_call.args).call.id == neg_output.call.id);  // one call, computed once
  const tmod::Tensor x = tmod::randn({2, 3}, 4);
  golden::check_close(g(x), m(x), 0.0, 0.0, "UsesSplit");
}

TEST_CASE("modules: rewrites reach into sub-graphs") {
  const Outer m;
  const auto g = tmod::symbolic_trace(m, tmod::spec({6}));
  const auto s = tmod::simplify(g);
  static_assert(tmod::node_count(g) == 8);  // call + (input, mul, mul, relu, relu) + (x, add)
  static_assert(tmod::node_count(s) == 5);  // call + (input, mul, relu) + x
  static_assert(tmod::ops_of(s) == ops<F::method_mul_fn, F::relu_fn>);
  const tmod::Tensor x = tmod::randn({6}, 5);
  golden::check_close(s(x), m(x), 0.0, 0.0, "simplified sub-graph");  // x * 2 * 4 == x * 8 exactly
}

TEST_CASE("modules: ResNet-18 traces and evaluates like eager mode") {
  tmod::manual_seed(4);
  models::ResNet net = models::resnet18(10, 8);
  net.eval();
  const auto g = tmod::symbolic_trace(net, tmod::spec({2, 3, 32, 32}));
  CHECK(tmod::count_ops<M::Conv2d>(g) == 20);  // stem + 8 blocks x 2 + 3 downsample convs
  CHECK(tmod::count_ops<M::Linear>(g) == 1);
  const tmod::Tensor x = tmod::randn({2, 3, 32, 32}, 5);
  const tmod::Tensor y = g(x);
  CHECK(y.shape() == tmod::Shape{2, 10});
  golden::check_close(y, net(x), 0.0, 0.0, "ResNet-18");
}

}  // namespace tmod_test_trace_modules
