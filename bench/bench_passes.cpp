// Optimization passes on full-width ResNet-18, 3x224x224, eval, one thread: the cost of
// optimize() itself, and the traced module next to its optimized copies in the same run.
//
//   BM_optimize_resnet18            optimize(traced, all five passes: FuseConvBn, FuseAddMul,
//                                   BackwardFoldScale, FuseConvEpilogue, FuseElemwise)
//                                   (target: <= 10 ms; the copy of the module is included)
//   BM_optimize_resnet18_megengine_passes   the same with MegEngine's three passes only
//   BM_resnet18_unoptimized         the traced module, batch 1
//   BM_resnet18_megengine_passes    its copy optimized with MegEngine's three passes (no batch norm left)
//   BM_resnet18_optimized           its copy optimized with all five (convs take bias, residual, relu)
//   BM_resnet18_*_kernels           only the conv and linear calls of that module, each run on inputs
//                                   of its traced shapes: module - kernels is the time spent outside
//                                   conv/linear kernels (target for the optimized copy: <= 0.5 ms)
//   BM_optimize_chain/N             optimize(chain, {"FuseAddMul"}) of a chain of N constant additions
//                                   (x + 1 + 1 ...: N - 1 rewrites fold it into x + N), N = 64, 256,
//                                   1024: how optimize()'s time grows with the number of rewrites
//   BM_machine_limits               the FMA peak of this core in the same run (machine_limits.hpp):
//                                   the module benchmarks report GFLOP/s and of_peak, counting the
//                                   direct convolutions' and fc's multiply-adds as 2 flops each
#include "machine_limits.hpp"
#include "smoke.hpp"

#include <models/add_chain.hpp>
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/traced_module.hpp>

#include <benchmark/benchmark.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

namespace tmod_bench_passes {

namespace {

namespace tmod = tracemod;
namespace G = tracemod::graph;
namespace M = tracemod::nn;

const std::vector<std::string> megengine_passes{"FuseConvBn", "FuseAddMul", "BackwardFoldScale"};
const std::vector<std::string> resnet_passes{"FuseConvBn", "FuseAddMul", "BackwardFoldScale", "FuseConvEpilogue",
                                             "FuseElemwise"};

/// The conv and linear calls of a module's graphs (module calls and op calls), each bound to random
/// inputs of the shapes it was traced with and its own weights' shapes.
std::vector<std::function<tmod::Tensor()>> kernel_calls(const tmod::TracedModule& m) {
  std::vector<std::function<tmod::Tensor()>> calls;
  for (const G::Graph* g : m.graph().graphs(true))
    for (const G::Expr* e : g->exprs(false)) {
      // Read-only like the node's value if that is (a weight whose kernel keeps derived data).
      const auto random_like = [](const G::Node* n) {
        tmod::Tensor t = tmod::randn(static_cast<const G::TensorNode*>(n)->shape(), 11);
        if (const tmod::Tensor* c = tmod::passes::constant_tensor(n); c != nullptr && c->read_only()) t.make_read_only();
        return t;
      };
      if (e->is_module_call()) {
        const tmod::Module* callee = static_cast<const G::ModuleNode*>(e->inputs().front())->owner();
        if (const auto* conv = dynamic_cast<const M::Conv2d*>(callee))
          calls.emplace_back([conv, x = random_like(e->inputs()[1])] { return conv->forward(x); });
        if (const auto* fc = dynamic_cast<const M::Linear*>(callee))
          calls.emplace_back([fc, x = random_like(e->inputs()[1])] { return fc->forward(x); });
        continue;
      }
      const tmod::functional::op_entry* op = e->op();
      if (op == nullptr || (op->target != "nn.conv2d" && op->target != "nn.conv_bias_activation" && op->target != "nn.linear"))
        continue;
      std::vector<tmod::Tensor> operands;
      std::vector<tmod::Value> params;
      const std::vector<G::CallArg> args = e->args();
      for (std::size_t i = 0; i < args.size(); ++i) {
        if (const auto* n = std::get_if<G::Node*>(&args[i]))
          operands.push_back(random_like(*n));
        else if (i < op->operands.size())
          operands.emplace_back();  // None
        else
          params.push_back(std::get<tmod::Value>(args[i]));
      }
      for (const auto& kv : e->kwargs()) params.push_back(std::get<tmod::Value>(kv.second));
      calls.emplace_back([op, operands, p = op->make_params(params)] {
        std::vector<tmod::functional::erased_operand> erased(operands.size());
        for (std::size_t i = 0; i < operands.size(); ++i)
          if (operands[i].defined()) erased[i] = {tmod::functional::erased_operand::kind::tensor, &operands[i]};
        return op->call(p.get(), erased);
      });
    }
  return calls;
}

/// 2 x the multiply-adds of the direct conv and linear calls of a module's graphs (module calls and
/// op calls): 2 x output elements x weight elements per output channel.
double conv_linear_flops(const tmod::TracedModule& m) {
  double flops = 0.0;
  const auto add = [&](const G::Node* out, const tmod::Shape& weight) {
    const auto* y = static_cast<const G::TensorNode*>(out);
    flops += 2.0 * static_cast<double>(y->shape().numel()) * static_cast<double>(weight.numel() / weight[0]);
  };
  for (const G::Graph* g : m.graph().graphs(true))
    for (const G::Expr* e : g->exprs(false)) {
      if (e->is_module_call()) {
        const tmod::Module* callee = static_cast<const G::ModuleNode*>(e->inputs().front())->owner();
        if (const auto* conv = dynamic_cast<const M::Conv2d*>(callee)) add(e->output(), conv->weight.shape());
        if (const auto* fc = dynamic_cast<const M::Linear*>(callee)) add(e->output(), fc->weight.shape());
        continue;
      }
      const tmod::functional::op_entry* op = e->op();
      if (op != nullptr && (op->target == "nn.conv2d" || op->target == "nn.conv_bias_activation" || op->target == "nn.linear"))
        add(e->output(), static_cast<const G::TensorNode*>(e->inputs()[1])->shape());
    }
  return flops;
}

struct passes_fixture {
  models::ResNet net = models::resnet18();
  tmod::Tensor x = tmod::randn({1, 3, 224, 224}, 7);
  tmod::TracedModule traced;
  tmod::TracedModule megengine;
  tmod::TracedModule optimized;
  std::vector<std::function<tmod::Tensor()>> traced_kernels;
  std::vector<std::function<tmod::Tensor()>> kernels;
  passes_fixture()
      : traced((net.eval(), tmod::trace_module(net, x, tmod::TraceOptions{.check = false}))),
        megengine(tmod::optimize(traced, megengine_passes)),
        optimized(tmod::optimize(traced, resnet_passes)),
        traced_kernels(kernel_calls(traced)),
        kernels(kernel_calls(optimized)) {}
};

passes_fixture& fixture() {
  static passes_fixture f;
  return f;
}

void BM_optimize_resnet18(benchmark::State& state) {
  passes_fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(tmod::optimize(f.traced, resnet_passes));
}
BENCHMARK(BM_optimize_resnet18)->Unit(benchmark::kMillisecond)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

void BM_optimize_resnet18_megengine_passes(benchmark::State& state) {
  passes_fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(tmod::optimize(f.traced, megengine_passes));
}
BENCHMARK(BM_optimize_resnet18_megengine_passes)->Unit(benchmark::kMillisecond)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

/// x + 1 + 1 + ... (`adds` additions of a number).
using models::AddChain;

void BM_optimize_chain(benchmark::State& state) {
  AddChain chain(static_cast<int>(state.range(0)));
  const tmod::TracedModule traced = tmod::trace_module(chain, tmod::randn({4}, 3), tmod::TraceOptions{.check = false});
  for (auto _ : state) benchmark::DoNotOptimize(tmod::optimize(traced, {"FuseAddMul"}));
  state.counters["exprs"] = static_cast<double>(traced.graph().exprs(false).as_list().size());
}
BENCHMARK(BM_optimize_chain)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond)->Repetitions(tracemod::bench::repetitions(3))->ReportAggregatesOnly(true);

void BM_resnet18_unoptimized(benchmark::State& state) {
  passes_fixture& f = fixture();
  tmod::set_num_threads(1);
  for (auto _ : state) benchmark::DoNotOptimize(f.traced(f.x));
  tmod::bench::report_flops(state, conv_linear_flops(f.traced));
}
BENCHMARK(BM_resnet18_unoptimized)->Unit(benchmark::kMillisecond)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

void BM_resnet18_megengine_passes(benchmark::State& state) {
  passes_fixture& f = fixture();
  tmod::set_num_threads(1);
  for (auto _ : state) benchmark::DoNotOptimize(f.megengine(f.x));
  tmod::bench::report_flops(state, conv_linear_flops(f.megengine));
}
BENCHMARK(BM_resnet18_megengine_passes)->Unit(benchmark::kMillisecond)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

void run_kernels(benchmark::State& state, const std::vector<std::function<tmod::Tensor()>>& kernels) {
  tmod::set_num_threads(1);
  for (auto _ : state)
    for (const auto& call : kernels) benchmark::DoNotOptimize(call());
  state.counters["calls"] = static_cast<double>(kernels.size());
}
void BM_resnet18_unoptimized_kernels(benchmark::State& state) { run_kernels(state, fixture().traced_kernels); }
BENCHMARK(BM_resnet18_unoptimized_kernels)->Unit(benchmark::kMillisecond)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);
void BM_resnet18_optimized_kernels(benchmark::State& state) { run_kernels(state, fixture().kernels); }
BENCHMARK(BM_resnet18_optimized_kernels)->Unit(benchmark::kMillisecond)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

void BM_resnet18_optimized(benchmark::State& state) {
  passes_fixture& f = fixture();
  tmod::set_num_threads(1);
  for (auto _ : state) benchmark::DoNotOptimize(f.optimized(f.x));
  tmod::bench::report_flops(state, conv_linear_flops(f.optimized));
}
BENCHMARK(BM_resnet18_optimized)->Unit(benchmark::kMillisecond)->Repetitions(tracemod::bench::repetitions(5))->ReportAggregatesOnly(true);

}  // namespace

}  // namespace tmod_bench_passes
