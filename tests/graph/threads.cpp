// One module run from several threads at once: a traced ResNet-18 (its first calls racing to build
// the execution plans), runs held under way together, an optimized ResNet-18 (whose first calls also
// race to transform the Winograd filters they keep), the eager modules, and watch points. Every
// output equals a single-threaded run bit for bit.
#include "graph_test.hpp"

#include <models/resnet.hpp>
#include <tracemod/graph/wrap.hpp>
#include <tracemod/passes.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <exception>
#include <latch>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace tmod_test_graph_threads {

using namespace graph_test;

namespace {

constexpr int thread_count = 4;
constexpr int iterations = 3;

/// Calls f(thread, iteration) from thread_count threads that start together, `times` times each;
/// rethrows the first exception a thread threw.
template <class F>
void run_together(const F& f, int times = iterations) {
  std::latch start(thread_count);
  std::vector<std::exception_ptr> errors(thread_count);
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        for (int i = 0; i < times; ++i) f(t, i);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (std::thread& th : threads) th.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

/// One input per thread, so that a value leaking from one run into another shows.
std::vector<tmod::Tensor> thread_inputs() {
  std::vector<tmod::Tensor> xs;
  for (int t = 0; t < thread_count; ++t) xs.push_back(tmod::randn({1, 3, 32, 32}));
  return xs;
}

models::ResNet small_resnet() {
  models::ResNet net(10, 8);
  net.eval();
  return net;
}

/// Runs `m` from thread_count threads on their inputs; every output must equal `expected[thread]`.
void check_concurrent_runs(const tmod::TracedModule& m, const std::vector<tmod::Tensor>& xs,
                           const std::vector<tmod::Tensor>& expected) {
  std::vector<std::vector<tmod::Tensor>> got(thread_count);
  run_together([&](int t, int) { got[t].push_back(m(xs[t])); });
  for (int t = 0; t < thread_count; ++t) {
    REQUIRE(got[t].size() == static_cast<std::size_t>(iterations));
    for (const tmod::Tensor& y : got[t]) check_identical(y, expected[t]);
  }
}

/// Kernels on the calling thread only while a test runs: concurrent calls then share the cores
/// without each one's kernels forking a team as well (the first test keeps the teams).
struct one_kernel_thread {
  one_kernel_thread() : before_(tmod::get_num_threads()) { tmod::set_num_threads(1); }
  ~one_kernel_thread() { tmod::set_num_threads(before_); }
  one_kernel_thread(const one_kernel_thread&) = delete;
  one_kernel_thread& operator=(const one_kernel_thread&) = delete;

 private:
  int before_;
};

/// While set, runs of `meet` wait (up to 10 s) until thread_count of them have arrived, so that
/// many runs of a graph calling it are under way at once.
std::atomic<int>* meeting = nullptr;

const auto meet = tmod::wrap("threads_test.meet", [](const tmod::Tensor& x) {
  if (meeting != nullptr) {
    meeting->fetch_add(1);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (meeting->load() < thread_count && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  }
  return x + 1.f;
});

struct meeting_scope {
  explicit meeting_scope(std::atomic<int>& arrived) { meeting = &arrived; }
  ~meeting_scope() { meeting = nullptr; }
  meeting_scope(const meeting_scope&) = delete;
  meeting_scope& operator=(const meeting_scope&) = delete;
};

/// conv -> meet -> relu(meet + conv): the conv's result is live across the meeting.
struct Meeting : tmod::Module {
  M::Conv2d conv{3, 8, 3, {.padding = 1}};
  TM_MODULE(Meeting, conv)
  auto forward(const auto& x) const {
    auto y = conv(x);
    auto z = meet(y);
    return F::relu(z + y);
  }
};

/// Restores the automatic convolution algorithm when a test that forced one ends.
struct forced_conv_algorithm {
  explicit forced_conv_algorithm(tmod::kernels::conv2d_algorithm a) { tmod::kernels::set_conv2d_algorithm(a); }
  ~forced_conv_algorithm() { tmod::kernels::set_conv2d_algorithm(tmod::kernels::conv2d_algorithm::automatic); }
  forced_conv_algorithm(const forced_conv_algorithm&) = delete;
  forced_conv_algorithm& operator=(const forced_conv_algorithm&) = delete;
};

}  // namespace

TEST_CASE("a traced ResNet-18 runs from 4 threads at once: outputs and run statistics equal one thread's") {
  const models::ResNet net = small_resnet();
  const std::vector<tmod::Tensor> xs = thread_inputs();
  tmod::TracedModule traced = tmod::trace_module(net, xs[0]);
  // The reference runs on a copy, so the threads below are the first to run `traced`.
  tmod::TracedModule single(traced);
  std::vector<tmod::Tensor> expected;
  for (const tmod::Tensor& x : xs) expected.push_back(single(x));
  for (int t = 0; t < thread_count; ++t) check_identical(expected[t], net(xs[t]));
  const std::size_t peak = single.graph().peak_live_bytes();
  REQUIRE(peak > 0);

  check_concurrent_runs(traced, xs, expected);
  // Each run measures its own peak: the concurrent runs did not add up into one count.
  CHECK(traced.graph().peak_live_bytes() == peak);
  CHECK(sub(traced, "layer2").graph().peak_live_bytes() == sub(single, "layer2").graph().peak_live_bytes());
}

TEST_CASE("runs under way at the same time count their live bytes apart") {
  const Meeting m;
  const std::vector<tmod::Tensor> xs = thread_inputs();
  const tmod::TracedModule traced = tmod::trace_module(m, xs[0]);
  const tmod::TracedModule single(traced);
  std::vector<tmod::Tensor> expected;
  for (const tmod::Tensor& x : xs) expected.push_back(single(x));
  const std::size_t peak = single.graph().peak_live_bytes();
  REQUIRE(peak > 0);

  std::atomic<int> arrived{0};
  std::vector<tmod::Tensor> got(thread_count);
  {
    const meeting_scope scope(arrived);
    run_together([&](int t, int) { got[t] = traced(xs[t]); }, 1);
  }
  REQUIRE(arrived.load() == thread_count);
  for (int t = 0; t < thread_count; ++t) check_identical(got[t], expected[t]);
  CHECK(traced.graph().peak_live_bytes() == peak);
}

TEST_CASE("an optimized ResNet-18 keeping Winograd filters runs from 4 threads at once, bit-equal to one thread") {
  const forced_conv_algorithm winograd(tmod::kernels::conv2d_algorithm::winograd);
  const one_kernel_thread serial;
  const models::ResNet net = small_resnet();
  const std::vector<tmod::Tensor> xs = thread_inputs();
  const tmod::TracedModule traced = tmod::trace_module(net, xs[0]);
  const std::vector<std::string> passes{"FuseConvBn", "FuseAddMul", "BackwardFoldScale", "FuseConvEpilogue",
                                        "FuseElemwise"};
  // Two optimized copies: the reference's kept filters are its own, so the threads below are the first
  // to transform the other's.
  const tmod::TracedModule single = tmod::optimize(traced, passes);
  const tmod::TracedModule optimized = tmod::optimize(traced, passes);
  REQUIRE(optimized.graph().get_function_by_type("nn.conv_bias_activation").as_count() > 0);
  std::vector<tmod::Tensor> expected;
  for (const tmod::Tensor& x : xs) expected.push_back(single(x));
  check_concurrent_runs(optimized, xs, expected);
}

TEST_CASE("eager modules run from 4 threads at once, bit-equal to one thread") {
  const one_kernel_thread serial;
  const models::ResNet net = small_resnet();
  const M::Conv2d conv(3, 8, 3, {.padding = 1});
  const std::vector<tmod::Tensor> xs = thread_inputs();
  std::vector<tmod::Tensor> expected_net, expected_conv;
  for (const tmod::Tensor& x : xs) {
    expected_net.push_back(net(x));
    expected_conv.push_back(conv(x));
  }
  std::vector<std::vector<tmod::Tensor>> got_net(thread_count), got_conv(thread_count);
  run_together([&](int t, int) {
    got_net[t].push_back(net(xs[t]));
    got_conv[t].push_back(conv(xs[t]));
  });
  for (int t = 0; t < thread_count; ++t) {
    REQUIRE(got_net[t].size() == static_cast<std::size_t>(iterations));
    for (int i = 0; i < iterations; ++i) {
      check_identical(got_net[t][i], expected_net[t]);
      check_identical(got_conv[t][i], expected_conv[t]);
    }
  }
}

TEST_CASE("watch points under concurrent runs hold the values of one whole run") {
  const one_kernel_thread serial;
  const models::ResNet net = small_resnet();
  const std::vector<tmod::Tensor> xs = thread_inputs();
  tmod::TracedModule traced = tmod::trace_module(net, xs[0]);
  tmod::graph::Node* relu_out = traced.graph().get_node_by_name("relu_out", true, false).as_unique();
  tmod::graph::Node* layer3_out = traced.graph().get_node_by_name("layer3_out", true, false).as_unique();
  tmod::graph::Node* x_in = traced.graph().inputs()[1];
  traced.set_watch_points({relu_out, layer3_out, x_in});
  // What each thread's input gives, watched on a copy (the copy's nodes are its own).
  std::vector<std::map<std::string, tmod::Tensor>> expected;
  {
    tmod::TracedModule single(traced);
    const tmod::graph::Graph& g = single.graph();
    single.set_watch_points({g.get_node_by_name("relu_out", true, false).as_unique(),
                             g.get_node_by_name("layer3_out", true, false).as_unique(), g.inputs()[1]});
    for (const tmod::Tensor& x : xs) {
      (void)single(x);
      std::map<std::string, tmod::Tensor> seen;
      for (const auto& [node, value] : single.watch_node_value()) seen[node->name()] = value.tensor();
      REQUIRE(seen.size() == 3);
      expected.push_back(seen);
    }
  }
  const auto same = [](const tmod::Tensor& a, const tmod::Tensor& b) {
    return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
  };
  // Readers take whole snapshots while the runs replace them.
  std::vector<int> torn(thread_count, 0);
  run_together([&](int t, int) {
    (void)traced(xs[t]);
    const auto watched = traced.watch_node_value();
    if (watched.size() != 3) {
      ++torn[t];
      return;
    }
    bool whole = false;
    for (const auto& e : expected)
      whole = whole || (same(watched.at(relu_out).tensor(), e.at("relu_out")) &&
                        same(watched.at(layer3_out).tensor(), e.at("layer3_out")) &&
                        same(watched.at(x_in).tensor(), e.at(x_in->name())));
    if (!whole) ++torn[t];
  });
  CHECK(torn == std::vector<int>(thread_count, 0));
}

TEST_CASE("an op call interpreted from 4 threads at once builds its params once for all of them") {
  // The params of a call are built on first use: every round drops them (set_args_kwargs with the
  // same arguments), then 4 threads race to build them. A racy build frees params a thread still
  // uses (ThreadSanitizer reports it; without it the values may come out wrong or crash).
  AddTwice m;  // y = (x + 1) + 2
  tmod::TracedModule t = tmod::trace_module(m, tmod::zeros({4}));
  tmod::graph::Expr* add = t.graph().get_method_by_type("__add__", false).as_list().front();
  REQUIRE(add->op() != nullptr);
  const std::vector<tmod::graph::NodeValue> in{tmod::graph::NodeValue(tmod::Value(tmod::tensor({1.f, 2.f, 3.f, 4.f})))};
  for (int round = 0; round < 20; ++round) {
    tmod::graph::set_args_kwargs(*add, add->args());
    std::vector<std::vector<tmod::Tensor>> got(thread_count);
    run_together([&](int th, int) { got[th].push_back(std::get<tmod::Value>(add->interpret(in).front()).tensor()); });
    for (const std::vector<tmod::Tensor>& ys : got)
      for (const tmod::Tensor& y : ys) check_identical(y, tmod::tensor({2.f, 3.f, 4.f, 5.f}));
  }
}

}  // namespace tmod_test_graph_threads
