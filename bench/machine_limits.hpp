// What this core can do at best, measured once per benchmark process, so kernel throughputs are
// reported as fractions of limits taken on the same machine in the same run.
#pragma once

#include <tracemod/kernels/simd.hpp>
#include <tracemod/profile/machine_peak.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <ctime>
#include <utility>
#include <vector>

namespace tracemod::bench {

// Every bandwidth in bench/ counts bytes read + bytes written by the program, once each; the
// read-for-ownership a cache does before writing a line (write-allocate) is not counted, for the
// limits below and for every kernel alike (a triad counts 3 arrays, a copy 2).
struct machine_limits_t {
  double peak_gflops;   ///< single-core FMA throughput, 2 flops per lane per FMA
  double triad_gbps;    ///< a[i] = b[i] + s*c[i] over arrays far larger than the LLC
  double copy_gbps_l2;  ///< a[i] = b[i] over arrays that fit in L2 but not in L1
};

namespace detail {

using kernels::fbatch;
using kernels::simd_width;

// Thread CPU time, like the CPU time Google Benchmark divides rate counters by: limits and kernel
// rates stay comparable when other processes share the cores.
inline double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

inline double copy_gbps_l2() {
  constexpr std::size_t n = (std::size_t{64} << 10) / simd_width;  // 2 x 256 KiB
  constexpr int passes = 256;
  std::vector<fbatch> a(n), b(n, fbatch(1.0f));
  benchmark::DoNotOptimize(a.data());
  double best = 0;
  for (int rep = 0; rep < 7; ++rep) {
    const double start = cpu_seconds();
    for (int pass = 0; pass < passes; ++pass) {
      std::copy(b.begin(), b.end(), a.begin());
      benchmark::ClobberMemory();
    }
    best = std::max(best, 2.0 * sizeof(fbatch) * n * passes / (cpu_seconds() - start) * 1e-9);
  }
  return best;
}

}  // namespace detail

/// Measured on first use, once per process.
inline const machine_limits_t& machine_limits() {
  // The profiler's probes (tracemod/profile/machine_peak.hpp), run longer: 3 x 256 MiB for the
  // triad, several times the LLC even on large server parts.
  static const machine_peak peak = measure_machine_peak(
      1, {.fma_iterations = std::int64_t{1} << 22, .triad_bytes = std::size_t{256} << 20, .repetitions = 7},
      detail::cpu_seconds);
  static const machine_limits_t limits{peak.gflops_per_thread, peak.triad_gbps, detail::copy_gbps_l2()};
  return limits;
}

/// Counters "GFLOP/s" and "of_peak" (fraction of the FMA peak of `cores` cores, each
/// machine_limits().peak_gflops).
inline void report_flops(benchmark::State& state, double flops_per_iter, std::int64_t cores = 1) {
  using benchmark::Counter;
  state.counters["GFLOP/s"] = Counter(flops_per_iter * 1e-9, Counter::kIsIterationInvariantRate);
  state.counters["of_peak"] =
      Counter(flops_per_iter / (machine_limits().peak_gflops * 1e9 * static_cast<double>(cores)),
              Counter::kIsIterationInvariantRate);
}

/// Counters "GB/s" and "of_triad" (fraction of machine_limits().triad_gbps).
inline void report_bytes(benchmark::State& state, double bytes_per_iter) {
  using benchmark::Counter;
  state.counters["GB/s"] = Counter(bytes_per_iter * 1e-9, Counter::kIsIterationInvariantRate);
  state.counters["of_triad"] =
      Counter(bytes_per_iter / (machine_limits().triad_gbps * 1e9), Counter::kIsIterationInvariantRate);
}

namespace detail {

inline void BM_machine_limits(benchmark::State& state) {
  const auto& limits = machine_limits();
  for (auto _ : state) benchmark::DoNotOptimize(&limits);
  state.counters["peak_gflops"] = limits.peak_gflops;
  state.counters["triad_gbps"] = limits.triad_gbps;
  state.counters["copy_gbps_l2"] = limits.copy_gbps_l2;
}

// An inline variable is initialised once per program, so every bench file may include this header
// and the benchmark is still registered exactly once.
inline const auto* const machine_limits_registration =
    benchmark::RegisterBenchmark("BM_machine_limits", BM_machine_limits)->Iterations(1);

}  // namespace detail

}  // namespace tracemod::bench
