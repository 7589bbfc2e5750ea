// Forward pre-hooks and forward hooks on eager calls: MegEngine's own hook test (test_module.py,
// test_module_api_hooks) in C++, replacement of inputs and outputs checked against the functional
// ops, order, removal, handles outliving and following their modules, copies, failing hooks, and
// calls from several threads.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/reflection.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace tmod_test_nn_hooks {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

using Inputs = std::span<const tmod::Value>;

bool same(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

// MegEngine's MyModule of test_module_api_hooks.
struct InnerModule : tmod::Module {
  M::BatchNorm2d bn{4};
  TM_MODULE(InnerModule, bn)
  auto forward(const auto& x) const { return bn(x); }
};
struct MyModule : tmod::Module {
  InnerModule i;
  M::BatchNorm2d bn{4};
  TM_MODULE(MyModule, i, bn)
  auto forward(const auto& x) const {
    auto y = i(x);
    return bn(y);
  }
};

// Returns (x, x + 1): a forward with a tuple result.
struct Pair : tmod::Module {
  TM_MODULE(Pair)
  auto forward(const auto& x) const { return std::tuple{x, x + 1.f}; }
};

const tmod::Tensor x4 = tmod::uniform({2, 4, 3, 3}, -1.f, 1.f, 7);

TEST_CASE("hooks: MegEngine's test: a +1 pre-hook and a +1 forward hook on every module, then removed") {
  MyModule net;
  int pre_count = 0, post_count = 0;
  std::vector<tmod::HookHandle> handles;
  for (tmod::Module& m : net.modules())
    handles.push_back(m.register_forward_pre_hook([&](const tmod::Module&, Inputs in) {
      ++pre_count;
      tmod::ValueList out;
      for (const tmod::Value& v : in) out.emplace_back(v.tensor() + 1.f);
      return out;
    }));
  for (tmod::Module& m : net.modules())
    handles.push_back(m.register_forward_hook([&](const tmod::Module&, Inputs, const tmod::Value& out) {
      ++post_count;
      return out.tensor() + 1.f;
    }));
  const tmod::Tensor y = net(x4);
  CHECK(pre_count == 4);
  CHECK(post_count == 4);
  // The same batch norms without hooks: i.bn sees x + 3, bn sees bn1 + 3, the result gets + 2.
  M::BatchNorm2d bn1(4), bn2(4);
  const tmod::Tensor r1 = bn1(x4 + 1.f + 1.f + 1.f);
  const tmod::Tensor r2 = bn2(r1 + 1.f + 1.f + 1.f);
  CHECK(same(net.i.bn.running_mean, bn1.running_mean));
  CHECK(same(net.bn.running_mean, bn2.running_mean));
  CHECK(same(y, r2 + 1.f + 1.f));

  CHECK(handles.size() == 8);
  for (tmod::HookHandle& h : handles) h.remove();
  const tmod::Tensor plain = net(x4);
  CHECK(pre_count == 4);
  CHECK(post_count == 4);
  const tmod::Tensor r3 = bn2(bn1(x4));
  CHECK(same(plain, r3));
}

TEST_CASE("hooks: a pre-hook replaces the input and a forward hook the output of a Linear") {
  M::Linear fc(3, 2);
  const tmod::Tensor x = tmod::uniform({4, 3}, -1.f, 1.f, 3);
  tmod::HookHandle pre = fc.register_forward_pre_hook([](const tmod::Module&, Inputs in) { return in[0].tensor() * 2.f; });
  const tmod::Tensor doubled = F::linear(x * 2.f, fc.weight, fc.bias);
  CHECK(same(fc(x), doubled));
  std::optional<tmod::Tensor> seen_input;
  tmod::HookHandle post = fc.register_forward_hook([&](const tmod::Module& m, Inputs in, const tmod::Value& out) {
    CHECK(&m == &fc);
    seen_input = in[0].tensor();  // the pre-hook's replacement
    return tmod::Value(out.tensor() + 1.f);
  });
  CHECK(same(fc(x), doubled + 1.f));
  REQUIRE(seen_input);
  CHECK(same(*seen_input, x * 2.f));
  pre.remove();
  CHECK(same(fc(x), F::linear(x, fc.weight, fc.bias) + 1.f));
  post.remove();
  CHECK(same(fc(x), F::linear(x, fc.weight, fc.bias)));
}

TEST_CASE("hooks: run in registration order, each seeing what the previous one returned") {
  M::Linear fc(3, 2);
  const tmod::Tensor x = tmod::ones({1, 3});
  std::vector<int> order;
  const auto pre = [&](int k) {
    return [&order, k](const tmod::Module&, Inputs) { order.push_back(k); };
  };
  tmod::HookHandle p0 = fc.register_forward_pre_hook(pre(0));
  tmod::HookHandle p1 = fc.register_forward_pre_hook(pre(1));
  tmod::HookHandle times2 = fc.register_forward_hook(
      [&](const tmod::Module&, Inputs, const tmod::Value& out) -> std::optional<tmod::Value> {
        order.push_back(2);
        return out.tensor() * 2.f;
      });
  tmod::HookHandle plus1 = fc.register_forward_hook([&](const tmod::Module&, Inputs, const tmod::Value& out) {
    order.push_back(3);
    return out.tensor() + 1.f;
  });
  const tmod::Tensor plain = F::linear(x, fc.weight, fc.bias);
  CHECK(same(fc(x), plain * 2.f + 1.f));  // not (plain + 1) * 2
  CHECK(order == std::vector<int>{0, 1, 2, 3});
  p0.remove();
  times2.remove();
  order.clear();
  CHECK(same(fc(x), plain + 1.f));
  CHECK(order == std::vector<int>{1, 3});
  tmod::HookHandle p2 = fc.register_forward_pre_hook(pre(4));  // after the removed ones: last
  order.clear();
  (void)fc(x);
  CHECK(order == std::vector<int>{1, 4, 3});
}

TEST_CASE("hooks: remove() twice, after the module is gone, and on an empty handle is safe") {
  tmod::HookHandle empty;
  empty.remove();
  CHECK_FALSE(empty.active());
  tmod::HookHandle h;
  {
    M::Linear fc(2, 2);
    h = fc.register_forward_hook([](const tmod::Module&, Inputs, const tmod::Value&) {});
    CHECK(h.active());
    h.remove();
    CHECK_FALSE(h.active());
    h.remove();
    h = fc.register_forward_hook([](const tmod::Module&, Inputs, const tmod::Value&) {});
  }
  CHECK_FALSE(h.active());  // the module (the record's only holder) is gone
  h.remove();
}

TEST_CASE("hooks: a handle follows its module when it moves") {
  int count = 0;
  M::Linear a(2, 2);
  tmod::HookHandle h = a.register_forward_hook([&](const tmod::Module&, Inputs, const tmod::Value&) { ++count; });
  M::Linear b = std::move(a);
  const tmod::Tensor x = tmod::ones({1, 2});
  (void)b(x);
  CHECK(count == 1);
  h.remove();
  (void)b(x);
  CHECK(count == 1);
}

TEST_CASE("hooks: copies and clones hold the registrations; a handle removes the hook from all of them") {
  int count = 0, later = 0;
  M::Linear a(2, 2);
  tmod::HookHandle h = a.register_forward_hook([&](const tmod::Module&, Inputs, const tmod::Value&) { ++count; });
  const M::Linear b = a;                // a copy: tensors shared
  const M::Linear c = a.clone();        // a deep copy
  std::unique_ptr<tmod::Module> d = static_cast<const tmod::Module&>(a).clone();
  tmod::HookHandle h2 = a.register_forward_hook([&](const tmod::Module&, Inputs, const tmod::Value&) { ++later; });
  const tmod::Tensor x = tmod::ones({1, 2});
  (void)b(x);
  (void)c(x);
  (void)dynamic_cast<const M::Linear&>(*d)(x);
  CHECK(count == 3);
  CHECK(later == 0);  // registered on `a` after the copies
  (void)a(x);
  CHECK(count == 4);
  CHECK(later == 1);
  h.remove();
  (void)a(x);
  (void)b(x);
  (void)c(x);
  CHECK(count == 4);
  CHECK(later == 2);
  M::Linear e = a;
  e.clear_forward_hooks();  // the copy's own hooks only
  (void)e(x);
  CHECK(later == 2);
  (void)a(x);
  CHECK(later == 3);
}

TEST_CASE("hooks: a tuple result is a tuple value; a replacement must keep forward's structure") {
  Pair p;
  const tmod::Tensor x = tmod::ones({2});
  tmod::HookHandle h = p.register_forward_hook([](const tmod::Module&, Inputs, const tmod::Value& out) {
    return tmod::Value::tuple({out[1], out[0]});  // swapped
  });
  const auto [a, b] = p(x);
  CHECK(same(a, x + 1.f));
  CHECK(same(b, x));
  h.remove();
  h = p.register_forward_hook([](const tmod::Module&, Inputs, const tmod::Value& out) { return out[0]; });
  CHECK_THROWS_WITH_AS((void)p(x),
                       doctest::Contains("the forward hooks of Pair replaced the output by Tensor(shape=(2,), "
                                         "dtype=float32), where forward returns a tuple of 2"),
                       tmod::value_error);
  h.remove();
  M::Linear fc(2, 2);
  h = fc.register_forward_pre_hook([](const tmod::Module&, Inputs in) { return tmod::ValueList{in[0], in[0]}; });
  CHECK_THROWS_WITH_AS((void)fc(x), "Linear: the forward pre-hooks of Linear returned 2 inputs, where forward takes 1",
                       tmod::value_error);
}

TEST_CASE("hooks: a failing hook is named with its module; the module's state and hooks stay as they were") {
  MyModule net;
  const tmod::Tensor mean_before = net.bn.running_mean.clone();
  const std::int32_t count_before = net.bn.num_batches_tracked.data<std::int32_t>()[0];
  tmod::HookHandle h = net.bn.register_forward_pre_hook([](const tmod::Module&, Inputs) -> std::optional<tmod::ValueList> {
    throw tmod::value_error("bad input");
  });
  CHECK_THROWS_WITH_AS((void)net(x4), "BatchNorm2d 'bn' in MyModule: forward pre-hook 0 of BatchNorm2d: bad input",
                       tmod::value_error);
  CHECK(same(net.bn.running_mean, mean_before));  // forward never ran
  CHECK(net.bn.num_batches_tracked.data<std::int32_t>()[0] == count_before);
  CHECK(h.active());
  h.remove();
  net.eval();
  h = net.i.register_forward_hook([](const tmod::Module&, Inputs, const tmod::Value&) { throw std::runtime_error("boom"); });
  CHECK_THROWS_WITH_AS((void)net(x4), "InnerModule 'i' in MyModule: forward hook 0 of InnerModule threw: boom",
                       tmod::module_error);
  CHECK(same(net.bn.running_mean, mean_before));  // eval: nothing changes
  h.remove();
  const M::BatchNorm2d ref_i = net.i.bn.clone();  // i.bn ran (in training mode) before bn's pre-hook failed
  const M::BatchNorm2d ref_bn = net.bn.clone();
  CHECK(same(net(x4), ref_bn(ref_i(x4))));  // the next call runs as if nothing had failed
}

TEST_CASE("hooks: one module runs from 4 threads at once with hooks registered") {
  M::Linear fc(8, 8);
  std::atomic<int> pre{0}, post{0};
  tmod::HookHandle h1 = fc.register_forward_pre_hook([&](const tmod::Module&, Inputs in) {
    ++pre;
    return in[0].tensor() * 2.f;
  });
  tmod::HookHandle h2 = fc.register_forward_hook([&](const tmod::Module&, Inputs, const tmod::Value& out) {
    ++post;
    return out.tensor() + 1.f;
  });
  const tmod::Tensor x = tmod::uniform({4, 8}, -1.f, 1.f, 5);
  const tmod::Tensor expected = F::linear(x * 2.f, fc.weight, fc.bias) + 1.f;
  std::vector<int> ok(4, 0);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 10; ++i) ok[t] += same(fc(x), expected) ? 1 : 0;
      });
  }
  CHECK(ok == std::vector<int>(4, 10));
  CHECK(pre == 40);
  CHECK(post == 40);
}

}  // namespace

}  // namespace tmod_test_nn_hooks
