// Forward hooks in the runtime graph: the interpreter runs the hooks of the builtin modules it calls
// (equal, bit for bit, to eager calls with the same hooks), of the sub-TracedModules it calls, and
// of a TracedModule called itself; Expr::interpret runs them too. trace_module records no hook and
// runs none while it records; the traced tree keeps the hooks of the modules it stands for.
#include "graph_test.hpp"

#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace tmod_test_graph_hooks {

using namespace graph_test;

namespace {

using Inputs = std::span<const tmod::Value>;

/// conv -> relu -> flatten -> fc, and a user module around a Linear.
struct Head : tmod::Module {
  M::Linear fc{2 * 4 * 4, 3};
  TM_MODULE(Head, fc)
  auto forward(const auto& x) const { return fc(x); }
};
struct ConvNet : tmod::Module {
  M::Conv2d conv{3, 2, 3, {.padding = 1}};
  Head head;
  TM_MODULE(ConvNet, conv, head)
  auto forward(const auto& x) const {
    auto y = conv(x);
    auto r = F::relu(y);
    auto f = F::flatten(r, 1);
    return head(f);
  }
};

const tmod::Tensor image = tmod::uniform({2, 3, 4, 4}, -1.f, 1.f, 11);

/// Doubles the input of a module.
tmod::HookHandle double_input(tmod::Module& m) {
  return m.register_forward_pre_hook([](const tmod::Module&, Inputs in) { return in[0].tensor() * 2.f; });
}
/// Adds 1 to the output of a module.
tmod::HookHandle add_one(tmod::Module& m) {
  return m.register_forward_hook([](const tmod::Module&, Inputs, const tmod::Value& out) { return out.tensor() + 1.f; });
}

/// The ConvNet computed with functional ops: the reference for every hook test below.
tmod::Tensor reference(const ConvNet& n, bool conv_doubled, bool fc_plus_one) {
  const tmod::Tensor in = conv_doubled ? image * 2.f : image;
  const tmod::Tensor y = F::conv2d(in, n.conv.weight, n.conv.bias, n.conv.conv_params());
  const tmod::Tensor f = F::flatten(F::relu(y), 1);
  const tmod::Tensor out = F::linear(f, n.head.fc.weight, n.head.fc.bias);
  return fc_plus_one ? out + 1.f : out;
}

TEST_CASE("hooks: the interpreter runs a builtin Conv2d's and Linear's hooks, equal to eager with the same hooks") {
  ConvNet net;
  tmod::TracedModule traced = tmod::trace_module(net, image);
  tmod::HookHandle h1 = double_input(traced.getattr("conv").module());
  tmod::HookHandle h2 = add_one(traced.getattr("head.fc").module());
  const tmod::Tensor interpreted = traced(image);
  check_identical(interpreted, reference(net, true, true));
  tmod::HookHandle e1 = double_input(net.conv);
  tmod::HookHandle e2 = add_one(net.head.fc);
  check_identical(net(image), interpreted);
  h1.remove();
  h2.remove();
  check_identical(traced(image), reference(net, false, false));
}

TEST_CASE("hooks: trace_module records none and runs none; the traced module keeps them, one handle for both") {
  ConvNet net;
  const std::string plain_graph = text(tmod::trace_module(net, image).graph());
  int runs = 0;
  tmod::HookHandle counted = net.head.register_forward_hook([&](const tmod::Module&, Inputs, const tmod::Value&) { ++runs; });
  tmod::HookHandle h1 = double_input(net.conv);
  tmod::HookHandle h2 = add_one(net.head.fc);
  const tmod::TracedModule unchecked = tmod::trace_module(net, image, tmod::TraceOptions{.check = false});
  CHECK(runs == 0);                                 // nothing ran while recording
  CHECK(text(unchecked.graph()) == plain_graph);    // and no hook is in the graph
  tmod::TracedModule traced = tmod::trace_module(net, image);  // the check compares calls with hooks
  CHECK(runs == 2);                                 // the check's eager and traced calls
  check_identical(traced(image), reference(net, true, true));
  CHECK(runs == 3);
  h1.remove();                                      // from the original and the traced module
  check_identical(traced(image), reference(net, false, true));
  check_identical(net(image), reference(net, false, true));
  traced.getattr("head.fc").module().clear_forward_hooks();  // the traced module's own registration only
  check_identical(traced(image), reference(net, false, false));
  check_identical(net(image), reference(net, false, true));
}

TEST_CASE("hooks: a TracedModule's own hooks and a sub-TracedModule's run when called and when interpreted") {
  ConvNet net;
  tmod::TracedModule traced = tmod::trace_module(net, image);
  std::vector<std::string> calls;
  tmod::HookHandle top = traced.register_forward_pre_hook([&](const tmod::Module& m, Inputs in) {
    calls.push_back(std::string(m.type_name()));
    return in[0].tensor() * 2.f;
  });
  tmod::HookHandle sub_hook = sub(traced, "head").register_forward_hook([&](const tmod::Module& m, Inputs, const tmod::Value& out) {
    calls.push_back(std::string(m.type_name()));
    return out.tensor() + 1.f;
  });
  check_identical(traced(image), reference(net, true, true));
  CHECK(calls == std::vector<std::string>{"ConvNet", "Head"});
  // flatten() inlines the call of `head`: its hooks no longer run; the top module's still do.
  calls.clear();
  check_identical(traced.flatten()(image), reference(net, true, false));
  CHECK(calls == std::vector<std::string>{"ConvNet"});
  // graph.eval runs the graph alone: the top module's hooks belong to calls of the module.
  calls.clear();
  check_identical(traced.graph().eval(image), reference(net, false, true));
  CHECK(calls == std::vector<std::string>{"Head"});
  // Expr::interpret of the call of `head` runs its hooks too.
  const tmod::graph::Expr* call = traced.graph().get_method_by_type("__call__").where([](const tmod::graph::Expr* e) {
    return e->inputs()[0]->name() == "head";
  }).as_unique();
  const tmod::Tensor flat = F::flatten(F::relu(F::conv2d(image, net.conv.weight, net.conv.bias, net.conv.conv_params())), 1);
  const std::vector<tmod::graph::NodeValue> args{static_cast<const tmod::Module*>(&sub(traced, "head")), tmod::Value(flat)};
  const auto out = call->interpret(args);
  check_identical(std::get<tmod::Value>(out.at(0)).tensor(), F::linear(flat, net.head.fc.weight, net.head.fc.bias) + 1.f);
}

TEST_CASE("hooks: the top module's hooks with a frozen non-tensor argument: the traced module sees the tensors") {
  AddK add;
  std::vector<std::size_t> seen;
  tmod::HookHandle h = add.register_forward_pre_hook([&](const tmod::Module&, Inputs in) {
    seen.push_back(in.size());
    tmod::ValueList out(in.begin(), in.end());
    out[0] = in[0].tensor() * 2.f;
    return out;
  });
  const tmod::Tensor x = tmod::ones({3});
  tmod::TracedModule traced = tmod::trace_module(add, x, 1);  // the check calls both with the hook
  check_identical(traced(x), x * 2.f + 1);
  check_identical(add(x, 1), x * 2.f + 1);
  CHECK(seen == std::vector<std::size_t>{2, 1, 1, 2});  // eager (x, 1); the traced module (x)
}

TEST_CASE("hooks: a hook failing in the interpreter names the call and the module; removing it heals the module") {
  ConvNet net;
  tmod::TracedModule traced = tmod::trace_module(net, image);
  tmod::HookHandle h = traced.getattr("conv").module().register_forward_hook(
      [](const tmod::Module&, Inputs, const tmod::Value&) -> std::optional<tmod::Value> { throw std::runtime_error("boom"); });
  CHECK_THROWS_WITH_AS((void)traced(image), doctest::Contains("(conv): forward hook 0 of Conv2d threw: boom"),
                       tmod::module_error);
  h.remove();
  h = traced.getattr("conv").module().register_forward_hook(
      [](const tmod::Module&, Inputs, const tmod::Value& out) { return tmod::Value::tuple({out, out}); });
  CHECK_THROWS_WITH_AS((void)traced(image),
                       doctest::Contains("(conv): the forward hooks of Conv2d replaced the output by (Tensor(shape=(2, 2, 4, 4)"),
                       tmod::value_error);
  h.remove();
  check_identical(traced(image), reference(net, false, false));
}

}  // namespace

}  // namespace tmod_test_graph_hooks
