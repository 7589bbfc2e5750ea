// Fused evaluation of typed graphs against the same forward run eagerly, on 16M floats (far beyond
// the LLC): relu(x * a + b) with scalars a and b, a 5-op and a 10-op chain of two inputs. Bytes per
// iteration count one read of each input and one write of the output, so "of_triad" says how close
// the one fused pass comes to streaming bandwidth (targets: >= 0.85 of triad, and >= 2.5x
// the eager time, which makes one pass per op and materialises every intermediate). Every call
// allocates its 64 MiB result; the buffer pool (core/storage.hpp) hands back the block the previous
// iteration freed, so no page fault is timed.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/trace.hpp>

#include "machine_limits.hpp"
#include "threads.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>

namespace tmod_bench_fused {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::bench::report_bytes;

constexpr std::int64_t large = std::int64_t{16} * 1024 * 1024;
constexpr double bytes_per_float = sizeof(float);

struct affine_relu {
  float a = 1.5f, b = -0.25f;
  auto operator()(const auto& x) const { return F::relu(x * a + b); }
};

struct chain5 {
  float a = 1.5f, b = 0.75f;
  auto operator()(const auto& x, const auto& y) const { return F::relu((x * a + y) * b - x); }
};

struct chain10 {
  float a = 1.5f, b = 0.75f, c = 3.f, d = 0.5f;
  auto operator()(const auto& x, const auto& y) const {
    return F::maximum(F::relu(((x * a + y) * b - x) / c + y) * d, x - y);
  }
};

template <class Forward>
void BM_fused_unary(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const auto g = tmod::symbolic_trace(Forward{}, tmod::spec({large}));
  const tmod::Tensor x = tmod::uniform({large}, -1.f, 1.f, 1);
  for (auto _ : state) benchmark::DoNotOptimize(g(x));
  report_bytes(state, 2 * bytes_per_float * large);
}

template <class Forward>
void BM_eager_unary(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const Forward f;
  const tmod::Tensor x = tmod::uniform({large}, -1.f, 1.f, 1);
  for (auto _ : state) benchmark::DoNotOptimize(f(x));
  report_bytes(state, 2 * bytes_per_float * large);
}

template <class Forward>
void BM_fused_binary(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const auto g = tmod::symbolic_trace(Forward{}, tmod::spec({large}), tmod::spec({large}));
  const tmod::Tensor x = tmod::uniform({large}, -1.f, 1.f, 1), y = tmod::uniform({large}, -1.f, 1.f, 2);
  for (auto _ : state) benchmark::DoNotOptimize(g(x, y));
  report_bytes(state, 3 * bytes_per_float * large);
}

template <class Forward>
void BM_eager_binary(benchmark::State& state) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const Forward f;
  const tmod::Tensor x = tmod::uniform({large}, -1.f, 1.f, 1), y = tmod::uniform({large}, -1.f, 1.f, 2);
  for (auto _ : state) benchmark::DoNotOptimize(f(x, y));
  report_bytes(state, 3 * bytes_per_float * large);
}

BENCHMARK(BM_fused_unary<affine_relu>)->Name("BM_fused/relu(x*a+b)")
    ->Unit(benchmark::kMillisecond)
    ->Apply(tracemod::bench::over_threads);
BENCHMARK(BM_eager_unary<affine_relu>)->Name("BM_eager/relu(x*a+b)")
    ->Unit(benchmark::kMillisecond)
    ->Apply(tracemod::bench::over_threads);
BENCHMARK(BM_fused_binary<chain5>)->Name("BM_fused/chain5")
    ->Unit(benchmark::kMillisecond)
    ->Apply(tracemod::bench::over_threads);
BENCHMARK(BM_eager_binary<chain5>)->Name("BM_eager/chain5")
    ->Unit(benchmark::kMillisecond)
    ->Apply(tracemod::bench::over_threads);
BENCHMARK(BM_fused_binary<chain10>)->Name("BM_fused/chain10")
    ->Unit(benchmark::kMillisecond)
    ->Apply(tracemod::bench::over_threads);
BENCHMARK(BM_eager_binary<chain10>)->Name("BM_eager/chain10")
    ->Unit(benchmark::kMillisecond)
    ->Apply(tracemod::bench::over_threads);

}  // namespace

}  // namespace tmod_bench_fused
