// Graph surgery on the traced ResNet-18 (1x3x32x32; the argument is the base width: 64 is
// ResNet-18 itself, 8 has the same graphs with kernels ~60x cheaper, so that the surgery and re-plan
// stand out of the run): replacing all 17 ReLU module calls by F::relu6 (insert_exprs +
// replace_node) and running once more, which re-plans the edited graphs, next to a run of an
// already planned module. The difference of the two is the surgery plus the re-plan (torch.fx:
// 4.9 ms for the same edit + recompile here). On a loaded machine quote CPU time.
//
//   BM_surgery_relu6_then_run   17 insert_exprs + replace_node, then one run (re-plans)
//   BM_surgery_relu6_compile_then_run  the same with compile() of every graph before the run
//   BM_surgery_relu6_only       the 17 edits alone
//   BM_traced_run_planned       one run of an unchanged, planned traced module
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/traced_module/surgery.hpp>
#include <tracemod/traced_module/trace_module.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace G = tracemod::graph;

struct surgery_fixture {
  models::ResNet net;
  tmod::Tensor x = tmod::randn({1, 3, 32, 32}, 7);
  tmod::TracedModule traced;

  explicit surgery_fixture(std::int64_t width) : net(1000, width), traced(init(net, x)) {}

  static tmod::TracedModule init(models::ResNet& n, const tmod::Tensor& in) {
    n.eval();
    return tmod::trace_module(n, in);
  }
};

surgery_fixture& fixture(std::int64_t width) {
  static surgery_fixture full(64);
  static surgery_fixture narrow(8);
  return width == 64 ? full : narrow;
}

void replace_relus(tmod::TracedModule& t) {
  std::vector<G::Expr*> calls;
  for (G::Expr* e : t.graph().get_method_by_type("__call__"))
    if (static_cast<const G::ModuleNode*>(e->inputs().front())->module_type() == "ReLU") calls.push_back(e);
  for (G::Expr* e : calls) {
    G::Graph& g = *e->top_graph();
    G::Node* r6 = nullptr;
    {
      auto scope = G::insert_exprs(g, e);
      r6 = F::relu6(tmod::Sym(e->inputs()[1])).node();
    }
    G::replace_node(g, {{e->output(), r6}});
  }
}

void BM_surgery_relu6_then_run(benchmark::State& state) {
  surgery_fixture& f = fixture(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    tmod::TracedModule t = f.traced;
    benchmark::DoNotOptimize(t(f.x));  // planned before the edit
    state.ResumeTiming();
    replace_relus(t);
    benchmark::DoNotOptimize(t(f.x));
  }
}
BENCHMARK(BM_surgery_relu6_then_run)->Arg(64)->Arg(8)->Unit(benchmark::kMicrosecond);

/// The bar: the 17 edits, compile() of every graph (the dead ReLU calls go), one run.
void BM_surgery_relu6_compile_then_run(benchmark::State& state) {
  surgery_fixture& f = fixture(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    tmod::TracedModule t = f.traced;
    benchmark::DoNotOptimize(t(f.x));
    state.ResumeTiming();
    replace_relus(t);
    for (G::Graph* g : t.graph().graphs(true)) g->compile();
    benchmark::DoNotOptimize(t(f.x));
  }
}
BENCHMARK(BM_surgery_relu6_compile_then_run)->Arg(64)->Arg(8)->Unit(benchmark::kMicrosecond);

void BM_surgery_relu6_only(benchmark::State& state) {
  surgery_fixture& f = fixture(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    tmod::TracedModule t = f.traced;
    state.ResumeTiming();
    replace_relus(t);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_surgery_relu6_only)->Arg(64)->Arg(8)->Unit(benchmark::kMicrosecond);

void BM_traced_run_planned(benchmark::State& state) {
  surgery_fixture& f = fixture(state.range(0));
  tmod::TracedModule t = f.traced;
  replace_relus(t);
  benchmark::DoNotOptimize(t(f.x));
  for (auto _ : state) benchmark::DoNotOptimize(t(f.x));
}
BENCHMARK(BM_traced_run_planned)->Arg(64)->Arg(8)->Unit(benchmark::kMicrosecond);

}  // namespace
