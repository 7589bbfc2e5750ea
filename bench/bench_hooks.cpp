// The cost of forward hooks on an eager call and on a traced module's run, next to the same calls
// without hooks. The module is an Identity on a 4-element tensor, so the call itself, not a kernel,
// is what is timed.
//
//   BM_call_no_hooks        m(x), no hook ever registered (one pointer test)
//   BM_call_removed_hook    m(x) after its only hook was removed (a flag is skipped)
//   BM_call_observing_hook  m(x) with one forward hook that returns nothing
//   BM_call_replacing_hooks m(x) with a pre-hook and a forward hook that both return replacements
//   BM_traced_no_hooks      traced(x) of a user module calling the Identity, no hooks
//   BM_traced_observing_hook the same with one observing forward hook on the called Identity
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/identity.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/traced_module/trace_module.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <benchmark/benchmark.h>

#include <span>

namespace tmod_bench_hooks {

namespace {

namespace tmod = tracemod;
namespace M = tracemod::nn;

using Inputs = std::span<const tmod::Value>;

struct Wrap : tmod::Module {
  M::Identity id;
  TM_MODULE(Wrap, id)
  auto forward(const auto& x) const { return id(x); }
};

const tmod::Tensor small = tmod::ones({4});

void run_calls(benchmark::State& state, const M::Identity& m) {
  for (auto _ : state) {
    tmod::Tensor y = m(small);
    benchmark::DoNotOptimize(y);
  }
}

void BM_call_no_hooks(benchmark::State& state) { run_calls(state, M::Identity{}); }

void BM_call_removed_hook(benchmark::State& state) {
  M::Identity m;
  m.register_forward_hook([](const tmod::Module&, Inputs, const tmod::Value&) {}).remove();
  run_calls(state, m);
}

void BM_call_observing_hook(benchmark::State& state) {
  M::Identity m;
  (void)m.register_forward_hook([](const tmod::Module&, Inputs, const tmod::Value&) {});
  run_calls(state, m);
}

void BM_call_replacing_hooks(benchmark::State& state) {
  M::Identity m;
  (void)m.register_forward_pre_hook([](const tmod::Module&, Inputs in) { return in[0]; });
  (void)m.register_forward_hook([](const tmod::Module&, Inputs, const tmod::Value& out) { return out; });
  run_calls(state, m);
}

void run_traced(benchmark::State& state, bool hooked) {
  Wrap w;
  if (hooked) (void)w.id.register_forward_hook([](const tmod::Module&, Inputs, const tmod::Value&) {});
  const tmod::TracedModule traced = tmod::trace_module(w, small);
  for (auto _ : state) {
    tmod::Value y = traced(small);
    benchmark::DoNotOptimize(y);
  }
}

void BM_traced_no_hooks(benchmark::State& state) { run_traced(state, false); }
void BM_traced_observing_hook(benchmark::State& state) { run_traced(state, true); }

BENCHMARK(BM_call_no_hooks);
BENCHMARK(BM_call_removed_hook);
BENCHMARK(BM_call_observing_hook);
BENCHMARK(BM_call_replacing_hooks);
BENCHMARK(BM_traced_no_hooks);
BENCHMARK(BM_traced_observing_hook);

}  // namespace

}  // namespace tmod_bench_hooks
