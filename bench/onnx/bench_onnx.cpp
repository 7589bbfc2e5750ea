// ONNX export and import of full-width ResNet-18 (46.8 MB of weights), the file in the page cache,
// next to tmod::save / tmod::load of the same module for scale:
//
//   BM_onnx_export_resnet18     tmod::onnx::export_model: flatten, build, check_model, shape inference, write
//   BM_onnx_import_resnet18     tmod::onnx::import_model: parse, build the graph, copy the weights, check
//   BM_onnx_save_resnet18       tmod::save of the same module (the native format)
//   BM_onnx_load_resnet18       tmod::load of it
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <benchmark/benchmark.h>

#include <filesystem>

namespace tmod_bench_onnx {

namespace {

namespace tmod = tracemod;

struct onnx_fixture {
  std::filesystem::path dir = std::filesystem::temp_directory_path();
  std::filesystem::path onnx = dir / "tracemod_bench_resnet18.onnx";
  std::filesystem::path native = dir / "tracemod_bench_onnx_resnet18.tmod";
  tmod::TracedModule traced = make();

  onnx_fixture() {
    tmod::onnx::export_model(traced, onnx);
    tmod::save(traced, native);
  }
  static tmod::TracedModule make() {
    models::ResNet net = models::resnet18();
    net.eval();
    return tmod::trace_module(net, tmod::randn({1, 3, 224, 224}, 7), tmod::TraceOptions{.check = false});
  }
  static onnx_fixture& get() {
    static onnx_fixture f;
    return f;
  }
};

void BM_onnx_export_resnet18(benchmark::State& state) {
  onnx_fixture& f = onnx_fixture::get();
  for (auto _ : state) tmod::onnx::export_model(f.traced, f.onnx);
}
void BM_onnx_import_resnet18(benchmark::State& state) {
  onnx_fixture& f = onnx_fixture::get();
  for (auto _ : state) benchmark::DoNotOptimize(tmod::onnx::import_model(f.onnx));
}
void BM_onnx_save_resnet18(benchmark::State& state) {
  onnx_fixture& f = onnx_fixture::get();
  for (auto _ : state) tmod::save(f.traced, f.native);
}
void BM_onnx_load_resnet18(benchmark::State& state) {
  onnx_fixture& f = onnx_fixture::get();
  for (auto _ : state) benchmark::DoNotOptimize(tmod::load(f.native));
}

}  // namespace

BENCHMARK(BM_onnx_export_resnet18)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_onnx_import_resnet18)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_onnx_save_resnet18)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_onnx_load_resnet18)->Unit(benchmark::kMillisecond);

}  // namespace tmod_bench_onnx
