// Probes of undefined tensors, failure atomicity of stateful forwards and mutating APIs (state
// compared byte for byte before and after each failing call), error messages that name the failing
// module and its path, deep module nesting, and typed graphs whose attributes are rebound.
#include "robustness/probe.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/trace.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tmod_test_robustness_modules {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
using probe::expect_atomic_failure;
using probe::expect_error;
using tmod::Tensor;

TEST_CASE("robustness: an undefined tensor holds nothing and every operation says so") {
  const Tensor u;
  CHECK(u.numel() == 0);
  CHECK(u.nbytes() == 0);
  expect_error<tmod::value_error>("reshape", [&] { (void)u.reshape({1}); }, {"Tensor.reshape", "undefined"});
  expect_error<tmod::value_error>("reshape to ()", [&] { (void)u.reshape({}); }, {"undefined"});
  expect_error<tmod::value_error>("size", [&] { (void)u.size(0); }, {"Tensor.size", "undefined"});
  expect_error<tmod::value_error>("at", [&] { (void)u.at({0}); }, {"Tensor.at", "undefined"});
  expect_error<tmod::value_error>("item", [&] { (void)u.item(); }, {"Tensor.item", "undefined"});
  expect_error<tmod::value_error>("clone", [&] { (void)u.clone(); }, {"Tensor.clone", "undefined"});
  expect_error<tmod::value_error>("data", [&] { (void)u.data<float>(); }, {"Tensor.data", "undefined"});
  const Tensor x = tmod::ones({2, 2});
  expect_error<tmod::value_error>("relu", [&] { (void)F::relu(u); }, {"nn.relu", "'inp'", "undefined"});
  expect_error<tmod::value_error>("add", [&] { (void)(x + u); }, {"__add__", "'other'", "undefined"});
  expect_error<tmod::value_error>("reshape op", [&] { (void)F::reshape(u, {1}); }, {"tensor.reshape", "undefined"});
  expect_error<tmod::value_error>("flatten", [&] { (void)F::flatten(u); }, {"tensor.flatten", "undefined"});
  expect_error<tmod::value_error>("conv2d weight", [&] { (void)F::conv2d(tmod::ones({1, 1, 3, 3}), u); },
                                  {"nn.conv2d", "'weight'", "undefined"});
  expect_error<tmod::value_error>("concat", [&] { (void)F::concat({x, u}); }, {"tensor.concat", "undefined"});
}

TEST_CASE("robustness: modules reject undefined inputs with value_error naming the module") {
  M::BatchNorm2d bn(3);
  expect_atomic_failure<tmod::value_error>("BatchNorm2d", bn, [&] { (void)bn(Tensor{}); }, {"BatchNorm2d", "undefined"});
  expect_atomic_failure<tmod::value_error>("BatchNorm2d.forward", bn, [&] { (void)bn.forward(Tensor{}); },
                                           {"BatchNorm2d", "undefined"});
  const M::Linear fc(2, 3);
  expect_error<tmod::value_error>("Linear", [&] { (void)fc(Tensor{}); }, {"Linear: argument 0", "undefined"});
  const M::Identity id;
  expect_error<tmod::value_error>("Identity", [&] { (void)id(Tensor{}); }, {"Identity", "undefined"});
}

TEST_CASE("robustness: a failing BatchNorm2d call counts no batch and changes no statistic") {
  for (const bool cumulative : {false, true}) {
    CAPTURE(cumulative);
    M::BatchNorm2dOptions o;
    if (cumulative) o.momentum = std::nullopt;
    M::BatchNorm2d bn(3, o);
    (void)bn(tmod::randn({2, 3, 2, 2}, 1));  // one good batch first: the state is not the initial one
    CHECK(bn.num_batches_tracked.item<std::int32_t>() == 1);
    expect_atomic_failure<tmod::value_error>("one value per channel", bn, [&] { (void)bn(tmod::randn({1, 3, 1, 1})); },
                                             {"BatchNorm2d", "more than 1 value per channel"});
    expect_atomic_failure<tmod::dtype_error>("int32 input", bn,
                                             [&] { (void)bn(tmod::zeros({2, 3, 2, 2}, tmod::DType::int32)); },
                                             {"BatchNorm2d", "int32"});
    expect_atomic_failure<tmod::shape_error>("channels", bn, [&] { (void)bn(tmod::randn({2, 4, 2, 2})); },
                                             {"BatchNorm2d", "channels"});
    // A counter rebound to the wrong dtype fails before the statistics move.
    M::BatchNorm2d broken(3);
    broken.setattr("num_batches_tracked", tmod::zeros({}));
    expect_atomic_failure<tmod::dtype_error>("float counter", broken, [&] { (void)broken(tmod::randn({2, 3, 2, 2})); },
                                             {"num_batches_tracked", "float32"});
    (void)bn(tmod::randn({2, 3, 2, 2}, 2));
    CHECK(bn.num_batches_tracked.item<std::int32_t>() == 2);
  }
}

struct WithBn : tmod::Module {
  M::BatchNorm2d bn{3};
  TM_MODULE(WithBn, bn)
  auto forward(const auto& x) const { return bn(x); }
};

TEST_CASE("robustness: a failing BatchNorm2d call through a typed graph changes nothing") {
  WithBn net;
  const auto g = tmod::symbolic_trace(net, tmod::spec({2, 3, 2, 2}));
  (void)g(tmod::randn({2, 3, 2, 2}));
  CHECK(net.bn.num_batches_tracked.item<std::int32_t>() == 1);
  expect_atomic_failure<tmod::value_error>("graph, one value per channel", net, [&] { (void)g(tmod::randn({1, 3, 1, 1})); },
                                           {"more than 1 value per channel"});
  expect_atomic_failure<tmod::dtype_error>("graph, int32", net,
                                           [&] { (void)g(tmod::zeros({2, 3, 2, 2}, tmod::DType::int32)); }, {"int32"});
}

TEST_CASE("robustness: Dropout draws nothing when its call fails") {
  M::Dropout drop(0.5);
  const tmod::Generator before = tmod::default_generator();
  expect_error<tmod::dtype_error>("int32", [&] { (void)drop(tmod::zeros({4}, tmod::DType::int32)); }, {"Dropout"});
  expect_error<tmod::value_error>("undefined", [&] { (void)drop(Tensor{}); }, {"Dropout", "undefined"});
  tmod::Generator expected = before;
  CHECK(tmod::default_generator().uniform() == expected.uniform());
}

struct Inner : tmod::Module {
  M::Linear fc{3, 2};
  TM_MODULE(Inner, fc)
};
struct Outer : tmod::Module {
  Inner inner;
  M::BatchNorm2d bn{2};
  TM_MODULE(Outer, inner, bn)
};

TEST_CASE("robustness: failing mutating APIs leave the module unchanged") {
  Outer m;
  tmod::StateDict bad = m.state_dict();
  bad.insert_or_assign("inner.fc.weight", tmod::zeros({4, 4}));
  bad.insert_or_assign("inner.fc.bias", tmod::zeros({2}));
  expect_atomic_failure<tmod::module_error>("load_state_dict", m, [&] { (void)m.load_state_dict(bad); },
                                            {"inner.fc.weight"});
  expect_atomic_failure<tmod::module_error>("setattr type", m, [&] { m.setattr("inner.fc", M::ReLU{}); },
                                            {"inner.fc"});
  expect_atomic_failure<tmod::module_error>("setattr path", m, [&] { m.setattr("inner.nothing.x", tmod::ones({1})); },
                                            {"nothing"});
  expect_atomic_failure<tmod::module_error>("setattr name", m, [&] { m.setattr("inner.a-b", tmod::ones({1})); },
                                            {"a-b"});
  expect_atomic_failure<tmod::module_error>("delattr reflected", m, [&] { m.delattr("inner.fc"); }, {"reflected"});
}

struct Net : tmod::Module {
  M::Sequential<M::ReLU, M::Linear> body{M::ReLU{}, M::Linear{6, 7}};
  TM_MODULE(Net, body)
  auto forward(const auto& x) const { return body(x); }
};

TEST_CASE("robustness: a failing module call names the module and its path") {
  const M::Sequential seq{M::Linear(4, 5), M::Linear(6, 7)};
  const std::string m1 = expect_error<tmod::shape_error>("Sequential child", [&] { (void)seq(tmod::ones({2, 4})); },
                                                         {"Linear '1' in Sequential", "nn.linear", "(2, 5)"});
  const Net net;
  expect_error<tmod::shape_error>("nested child", [&] { (void)net(tmod::ones({2, 4})); },
                                  {"Linear 'body.1' in Net", "nn.linear"});
  const M::Linear fc(4, 5);
  const std::string m3 = expect_error<tmod::shape_error>("root", [&] { (void)fc(tmod::ones({2, 3})); }, {"nn.linear"});
  CHECK(m3.rfind("Linear: nn.linear", 0) == 0);
  // The next failure is named afresh (no stale record from the previous one).
  expect_error<tmod::dtype_error>("again", [&] { (void)seq(tmod::zeros({2, 4}, tmod::DType::int32)); },
                                  {"Linear '0' in Sequential", "int32"});
}

struct Node : tmod::Module {
  tmod::Buffer value{tmod::zeros({1})};
  TM_MODULE(Node, value)
};

/// A chain of `depth` Nodes below a root, each added to the current deepest one (linear time; adding
/// at the root instead would walk the growing chain on every setattr).
Node chain_of(std::size_t depth) {
  Node root;
  tmod::Module* cur = &root;
  for (std::size_t i = 0; i < depth; ++i) {
    cur->setattr("next", Node{});
    cur = &cur->getattr("next").module();
  }
  return root;
}

TEST_CASE("robustness: module nesting is capped at max_module_depth with a module_error") {
  Node deepest = chain_of(tmod::max_module_depth);
  CHECK(deepest.named_modules().size() == tmod::max_module_depth + 1);
  CHECK(deepest.state_dict().size() == tmod::max_module_depth + 1);
  CHECK(deepest.clone().named_modules().size() == tmod::max_module_depth + 1);
  CHECK(deepest.repr().size() > tmod::max_module_depth);
  deepest.eval();
  CHECK(!deepest.getattr("next").module().training());

  Node parent;
  expect_atomic_failure<tmod::module_error>("one level too deep", parent,
                                            [&] { parent.setattr("next", std::move(deepest)); },
                                            {"setattr('next')", "max_module_depth"});
  CHECK(deepest.named_modules().size() == tmod::max_module_depth + 1);  // not moved from by the failed call
}

TEST_CASE("robustness: a 20,000-deep tree built through inner references fails traversals cleanly") {
  // setattr on an inner module cannot see how deep that module sits, so the tree can outgrow the
  // cap; every traversal then stops with a module_error, and destruction is iterative.
  Node root = chain_of(20000);
  tmod::Module* cur = &root;
  while (cur->has_attr("next")) cur = &cur->getattr("next").module();
  expect_error<tmod::module_error>("named_modules", [&] { (void)root.named_modules(); }, {"max_module_depth"});
  expect_error<tmod::module_error>("state_dict", [&] { (void)root.state_dict(); }, {"max_module_depth"});
  expect_error<tmod::module_error>("clone", [&] { (void)root.clone(); }, {"max_module_depth"});
  expect_error<tmod::module_error>("repr", [&] { (void)root.repr(); }, {"max_module_depth"});
  expect_error<tmod::module_error>("load_state_dict", [&] { (void)root.load_state_dict({}); }, {"max_module_depth"});
  expect_error<tmod::module_error>("train", [&] { root.eval(); }, {"max_module_depth"});
  CHECK(root.training());
  CHECK(cur->training());  // the failed eval() changed no flag
}

TEST_CASE("robustness: typed-graph errors name operands as eager mode does") {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& y) { return x + y; }, tmod::spec({3}),
                                      tmod::spec({3}));
  const Tensor i = tmod::zeros({3}, tmod::DType::int32), f = tmod::ones({3});
  const std::string eager = expect_error<tmod::dtype_error>("eager", [&] { (void)(i + f); }, {"'self'"});
  const std::string typed = expect_error<tmod::dtype_error>("typed", [&] { (void)g(i, f); }, {"__add__", "'self'"});
  CHECK(typed == eager);
  expect_error<tmod::dtype_error>("typed other", [&] { (void)g(f, i); }, {"__add__", "'other'"});
}

struct Scaled : tmod::Module {
  tmod::Parameter scale{tmod::ones({3})};
  TM_MODULE(Scaled, scale)
  auto forward(const auto& x) const { return x * scale; }
};

TEST_CASE("robustness: a typed graph follows an attribute rebound by setattr") {
  Scaled m;
  const auto g = tmod::symbolic_trace(m, tmod::spec({3}));
  const Tensor x = tmod::tensor({1.f, 2.f, 3.f});
  m.setattr("scale", tmod::tensor({2.f, 0.5f, -1.f}));
  const Tensor y = g(x);
  CHECK(y.at({0}) == 2.f);
  CHECK(y.at({1}) == 1.f);
  CHECK(y.at({2}) == -3.f);
  m.setattr("scale", tmod::ones({4}));  // a shape the graph's ops reject: eager mode's error
  expect_error<tmod::shape_error>("rebound shape", [&] { (void)g(x); }, {"__mul__", "(4,)"});
  m.setattr("scale", Tensor{});
  expect_error<tmod::value_error>("rebound undefined", [&] { (void)g(x); }, {"__mul__", "undefined"});
}

}  // namespace

}  // namespace tmod_test_robustness_modules
