// Optimization passes (issue 9) on full-width ResNet-18, 3x224x224, eval, one thread: the cost of
// optimize() itself, and the traced module next to its optimized copy in the same run.
//
//   BM_optimize_resnet18            optimize(traced, {"FuseConvBn", "FuseAddMul", "BackwardFoldScale"})
//                                   (bar: <= 10 ms; the copy of the module is included)
//   BM_resnet18_unoptimized         the traced module, batch 1
//   BM_resnet18_optimized           its optimized copy (no batch norm left), batch 1
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/traced_module.hpp>

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

namespace {

namespace tmod = tracemod;

const std::vector<std::string> resnet_passes{"FuseConvBn", "FuseAddMul", "BackwardFoldScale"};

struct passes_fixture {
  models::ResNet net = models::resnet18();
  tmod::Tensor x = tmod::randn({1, 3, 224, 224}, 7);
  tmod::TracedModule traced;
  tmod::TracedModule optimized;
  passes_fixture()
      : traced((net.eval(), tmod::trace_module(net, x, tmod::TraceOptions{.check = false}))),
        optimized(tmod::optimize(traced, resnet_passes)) {}
};

passes_fixture& fixture() {
  static passes_fixture f;
  return f;
}

void BM_optimize_resnet18(benchmark::State& state) {
  passes_fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(tmod::optimize(f.traced, resnet_passes));
}
BENCHMARK(BM_optimize_resnet18)->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true);

void BM_resnet18_unoptimized(benchmark::State& state) {
  passes_fixture& f = fixture();
  tmod::set_num_threads(1);
  for (auto _ : state) benchmark::DoNotOptimize(f.traced(f.x));
}
BENCHMARK(BM_resnet18_unoptimized)->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true);

void BM_resnet18_optimized(benchmark::State& state) {
  passes_fixture& f = fixture();
  tmod::set_num_threads(1);
  for (auto _ : state) benchmark::DoNotOptimize(f.optimized(f.x));
}
BENCHMARK(BM_resnet18_optimized)->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace
