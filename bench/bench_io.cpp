// Saving and loading full-width ResNet-18 (46.8 MB of weights), traced, the file in the page cache:
//
//   BM_io_save_resnet18            tmod::save to a file
//   BM_io_load_resnet18/threads:N  tmod::load, ready to run (tensor checksums verified, on N threads),
//                                  wall-clock time
//   BM_io_load_resnet18_nocheck    tmod::load with verify_tensor_checksums = false
//   BM_io_load_bytes_resnet18      tmod::load from bytes in memory (tensors copied)
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/traced_module.hpp>

#include "threads.hpp"

#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace tmod_bench_io {

namespace {

namespace tmod = tracemod;

struct io_fixture {
  std::filesystem::path path = std::filesystem::temp_directory_path() / "tracemod_bench_io_resnet18.tmod";
  tmod::TracedModule traced = make();
  std::string bytes;

  io_fixture() {
    tmod::save(traced, path);
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  static tmod::TracedModule make() {
    models::ResNet net = models::resnet18();
    net.eval();
    return tmod::trace_module(net, tmod::randn({1, 3, 224, 224}, 7), tmod::TraceOptions{.check = false});
  }
  static io_fixture& get() {
    static io_fixture f;
    return f;
  }
};

void BM_io_save_resnet18(benchmark::State& state) {
  io_fixture& f = io_fixture::get();
  for (auto _ : state) tmod::save(f.traced, f.path);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(f.bytes.size()));
}

void BM_io_load_resnet18(benchmark::State& state) {
  io_fixture& f = io_fixture::get();
  tmod::save(f.traced, f.path);
  const tmod::bench::scoped_threads threads(state, 0);
  for (auto _ : state) benchmark::DoNotOptimize(tmod::load(f.path));
}

void BM_io_load_resnet18_nocheck(benchmark::State& state) {
  io_fixture& f = io_fixture::get();
  tmod::save(f.traced, f.path);
  for (auto _ : state) benchmark::DoNotOptimize(tmod::load(f.path, {.verify_tensor_checksums = false}));
}

void BM_io_load_bytes_resnet18(benchmark::State& state) {
  io_fixture& f = io_fixture::get();
  const auto bytes = std::as_bytes(std::span(f.bytes.data(), f.bytes.size()));
  for (auto _ : state) benchmark::DoNotOptimize(tmod::load(bytes));
}

BENCHMARK(BM_io_save_resnet18)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_io_load_resnet18)->Apply(tmod::bench::over_threads)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_io_load_resnet18_nocheck)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_io_load_bytes_resnet18)->Unit(benchmark::kMillisecond);

}  // namespace

}  // namespace tmod_bench_io
