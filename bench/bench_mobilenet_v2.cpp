// Full-width MobileNetV2 (torchvision's structure, random weights), 3x224x224, eval mode: batch 1
// and 8, at 1 and 2 threads (tmod::set_num_threads; a build without OpenMP runs one thread
// whatever is asked, and says so in the label).
#include "smoke.hpp"

#include <machine_limits.hpp>
#include <models/mobilenet_v2.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/core/parallel.hpp>

#include <benchmark/benchmark.h>

#include <string>

namespace tmod_bench_mobilenet_v2 {

namespace {

namespace tmod = tracemod;

models::MobileNetV2& mobilenet() {
  static models::MobileNetV2 net = [] {
    models::MobileNetV2 m = models::mobilenet_v2();
    m.eval();
    return m;
  }();
  return net;
}

void BM_mobilenet_v2_forward(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(1));
  const int previous = tmod::get_num_threads();
  tmod::set_num_threads(threads);
  const tmod::Tensor x = tmod::randn({state.range(0), 3, 224, 224}, 7);
  for (auto _ : state) benchmark::DoNotOptimize(mobilenet()(x));
  tmod::set_num_threads(previous);
  state.SetLabel(std::string(tmod::parallel_backend_available() ? "" : "serial build; ") + "batch " +
                 std::to_string(state.range(0)) + ", " + std::to_string(threads) + " thread(s)");
  // 300.8 MMAC per image (torchvision's figure for mobilenet_v2).
  tracemod::bench::report_flops(state, 2.0 * 300.8e6 * static_cast<double>(state.range(0)));
}
BENCHMARK(BM_mobilenet_v2_forward)
    ->ArgsProduct({{1, 8}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(tracemod::bench::min_time(0.5));

}  // namespace

}  // namespace tmod_bench_mobilenet_v2
