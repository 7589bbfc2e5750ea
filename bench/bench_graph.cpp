// The runtime graph: cost of tracing, of the interpreter per expr, and of running
// ResNet-18 through a TracedModule, each next to its eager counterpart in the same run.
//
//   BM_trace_module_resnet18        trace_module(ResNet-18 full width), without the default check
//   BM_tiny_exprs_eager/_traced     1,000 `x + 1` on 16 floats: eager loop vs the traced graph
//                                   (counter per_expr, seconds; the difference is the interpreter's cost)
//   BM_resnet18_eager/_traced/_flat batch 1, 224x224, eval: eager, TracedModule, flattened
//                                   (counters: peak_live_MB of the flattened graph's interpreter,
//                                   largest_activation_MB, weights_MB)
//   BM_resnet18_plan/dynamic        building the execution plans of every graph of the traced
//                                   ResNet-18 (0: static trace, 1: dynamic N, H, W); counter per_plan
//   BM_resnet18_static_vs_dynamic   the static and the dynamic trace at the traced shape, alternated
//                                   in blocks (counter dynamic_over_static: median time ratio)
#include "alternated.hpp"
#include "smoke.hpp"

#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/traced_module.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>

namespace tmod_bench_graph {

namespace {

namespace tmod = tracemod;

constexpr int tiny_count = 1000;

struct TinyChain : tmod::Module {
  TM_MODULE(TinyChain)
  auto forward(const auto& x) const {
    auto y = x + 1;
    for (int i = 1; i < tiny_count; ++i) y = y + 1;
    return y;
  }
};

struct resnet_fixture {
  models::ResNet net = models::resnet18();
  tmod::Tensor x = tmod::randn({1, 3, 224, 224}, 7);
  tmod::TracedModule traced;
  tmod::TracedModule flat;
  tmod::TracedModule dynamic;
  resnet_fixture()
      : traced((net.eval(), tmod::trace_module(net, x, tmod::TraceOptions{.check = false}))),
        flat(traced.flatten()),
        dynamic(tmod::trace_module(net, x,
                                   tmod::TraceOptions{.check = false, .dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}})) {}
};

resnet_fixture& fixture() {
  static resnet_fixture f;
  return f;
}

void BM_trace_module_resnet18(benchmark::State& state) {
  resnet_fixture& f = fixture();
  for (auto _ : state) {
    tmod::TracedModule t = tmod::trace_module(f.net, f.x, tmod::TraceOptions{.check = false});
    benchmark::DoNotOptimize(&t);
  }
}
BENCHMARK(BM_trace_module_resnet18)->Unit(benchmark::kMicrosecond)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

void BM_tiny_exprs_eager(benchmark::State& state) {
  TinyChain m;
  const tmod::Tensor x = tmod::randn({16});
  for (auto _ : state) benchmark::DoNotOptimize(m(x));
  state.counters["per_expr"] =
      benchmark::Counter(tiny_count, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_tiny_exprs_eager)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

void BM_tiny_exprs_traced(benchmark::State& state) {
  TinyChain m;
  const tmod::Tensor x = tmod::randn({16});
  tmod::TracedModule t = tmod::trace_module(m, x);
  for (auto _ : state) benchmark::DoNotOptimize(t(x));
  state.counters["per_expr"] =
      benchmark::Counter(tiny_count, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_tiny_exprs_traced)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

void BM_resnet18_eager(benchmark::State& state) {
  resnet_fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(f.net(f.x));
}
BENCHMARK(BM_resnet18_eager)->Unit(benchmark::kMillisecond)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

void BM_resnet18_traced(benchmark::State& state) {
  resnet_fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(f.traced(f.x));
}
BENCHMARK(BM_resnet18_traced)->Unit(benchmark::kMillisecond)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

void BM_resnet18_flat(benchmark::State& state) {
  resnet_fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(f.flat(f.x));
  std::size_t largest = 0;
  for (const tmod::graph::Node* n : f.flat.graph().nodes(false))
    if (n->is_tensor() && n->expr()->kind() != tmod::graph::ExprKind::get_attr)
      largest = std::max(largest, static_cast<std::size_t>(static_cast<const tmod::graph::TensorNode*>(n)->shape().numel()) * 4);
  std::size_t weights = 0;
  for (const auto& [name, t] : f.net.state_dict()) weights += t.nbytes();
  state.counters["peak_live_MB"] = static_cast<double>(f.flat.graph().peak_live_bytes()) / 1e6;
  state.counters["largest_activation_MB"] = static_cast<double>(largest) / 1e6;
  state.counters["weights_MB"] = static_cast<double>(weights) / 1e6;
}
BENCHMARK(BM_resnet18_flat)->Unit(benchmark::kMillisecond)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

void BM_resnet18_plan(benchmark::State& state) {
  resnet_fixture& f = fixture();
  const tmod::TracedModule& t = state.range(0) == 0 ? f.traced : f.dynamic;
  const std::vector<tmod::graph::Graph*> graphs = t.graph().graphs(true);
  for (auto _ : state)
    for (const tmod::graph::Graph* g : graphs) {
      tmod::graph::ExecutionPlan plan(*g);
      benchmark::DoNotOptimize(&plan);
    }
  state.counters["per_plan"] = benchmark::Counter(static_cast<double>(graphs.size()),
                                                  benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_resnet18_plan)->ArgName("dynamic")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

void BM_resnet18_static_vs_dynamic(benchmark::State& state) {
  resnet_fixture& f = fixture();
  const tracemod::bench::alternated_times t = tracemod::bench::run_alternated(
      state, 4, [&] { benchmark::DoNotOptimize(f.traced(f.x)); }, [&] { benchmark::DoNotOptimize(f.dynamic(f.x)); });
  state.counters["dynamic_over_static"] = t.median_a > 0 ? t.median_b / t.median_a : 0;
}
BENCHMARK(BM_resnet18_static_vs_dynamic)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(tracemod::bench::min_time(2.0));

}  // namespace

}  // namespace tmod_bench_graph
