// What the machine can do at best, as the profiler reports fractions of it: the FMA throughput of one
// core and the memory bandwidth of a triad. Short probes measure both on first use (about 50 ms on
// one thread); the result is cached per thread count for the life of the process. The benchmarks
// run the same probes, longer (bench/machine_limits.hpp).
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace tracemod {

/// The limits a call's achieved rates are compared with.
struct machine_peak {
  double gflops_per_thread = 0;  ///< FMA throughput of one core: 2 flops per lane per FMA
  double triad_gbps = 0;         ///< a[i] = b[i] + s * c[i] over arrays larger than the caches, on `threads` threads
  int threads = 1;

  [[nodiscard]] double gflops() const noexcept { return gflops_per_thread * threads; }
  /// How close a call runs to the limit that binds it: the larger of its share of the FMA peak and
  /// its share of the triad bandwidth (a roofline reading: one of the two is the bound).
  [[nodiscard]] double fraction(double achieved_gflops, double achieved_gbps) const noexcept {
    const double compute = gflops() > 0 ? achieved_gflops / gflops() : 0;
    const double memory = triad_gbps > 0 ? achieved_gbps / triad_gbps : 0;
    return std::max(compute, memory);
  }
};

/// How long the probes run: FMA iterations per repetition, bytes of each triad array, repetitions
/// (the best one counts).
struct peak_probe {
  std::int64_t fma_iterations = std::int64_t{1} << 20;
  std::size_t triad_bytes = std::size_t{32} << 20;
  int repetitions = 3;
};

namespace peak_detail {

using kernels::fbatch;
using kernels::simd_width;

/// Seconds of a monotonic clock: wall time, as the profiler's call times are.
inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Keeps the compiler from discarding the computation that produced `v`.
template <class T>
inline void keep(const T& v) {
  asm volatile("" : : "m"(v) : "memory");
}

/// Independent accumulator chains: enough to cover FMA latency x ports (4 x 2 on AVX-512 cores), few
/// enough to stay in registers with the two constants even with 16 vector registers. The chains are
/// a fold over constant indices (no loop, no lambda), so they are registers whatever gets inlined.
inline constexpr std::size_t fma_chains = 12;

/// GFLOP/s of one thread running FMAs, best of `probe.repetitions`, timed by `now`.
template <std::size_t... J>
double fma_gflops(const peak_probe& probe, double (*now)(), std::index_sequence<J...>) {
  // acc -> acc * m + a converges to 1: no overflow, no denormals, no way to fold the loop.
  const fbatch m(0.999999f);
  const fbatch a(0.000001f);
  double best = 0;
  for (int rep = 0; rep < probe.repetitions; ++rep) {
    std::array<fbatch, sizeof...(J)> acc{fbatch(1.0f + 0.01f * J)...};
    const double start = now();
    for (std::int64_t i = 0; i < probe.fma_iterations; ++i) ((acc[J] = xsimd::fma(acc[J], m, a)), ...);
    const double elapsed = now() - start;
    keep(acc);
    best = std::max(best, 2.0 * sizeof...(J) * simd_width * static_cast<double>(probe.fma_iterations) / elapsed * 1e-9);
  }
  return best;
}

/// GB/s of a[i] = b[i] + s * c[i] (3 arrays counted once each; the cache's read-for-ownership of `a`
/// is not counted), split over `threads` threads, best of `probe.repetitions`, timed by `now`.
inline double triad_gbps(const peak_probe& probe, int threads, double (*now)()) {
  const std::size_t n = std::max<std::size_t>(probe.triad_bytes / sizeof(fbatch), 1);
  // Value-initialised vectors of aligned batches: every page is faulted in before timing.
  std::vector<fbatch> a(n), b(n, fbatch(1.0f)), c(n, fbatch(2.0f));
  const fbatch s(3.0f);
  const int saved = get_num_threads();
  set_num_threads(threads);
  double best = 0;
  for (int rep = 0; rep < probe.repetitions; ++rep) {
    const double start = now();
    parallel_for(0, static_cast<std::int64_t>(n), 1 << 14, [&](std::int64_t lo, std::int64_t hi) {
      for (auto i = static_cast<std::size_t>(lo); i < static_cast<std::size_t>(hi); ++i) a[i] = b[i] + s * c[i];
    });
    asm volatile("" : : : "memory");
    best = std::max(best, 3.0 * sizeof(fbatch) * static_cast<double>(n) / (now() - start) * 1e-9);
  }
  set_num_threads(saved);
  return best;
}

}  // namespace peak_detail

/// Runs the probes now, on `threads` threads for the bandwidth (the FMA peak is per core).
inline machine_peak measure_machine_peak(int threads, const peak_probe& probe = {},
                                         double (*now)() = peak_detail::wall_seconds) {
  threads = std::max(threads, 1);
  return {peak_detail::fma_gflops(probe, now, std::make_index_sequence<peak_detail::fma_chains>{}),
          peak_detail::triad_gbps(probe, threads, now), threads};
}

/// The machine's peak for `threads` threads: measured on the first call for that count, then cached.
inline machine_peak cached_machine_peak(int threads) {
  static std::mutex mutex;
  static std::map<int, machine_peak> cache;
  const std::lock_guard lock(mutex);
  const auto it = cache.find(threads);
  if (it != cache.end()) return it->second;
  return cache.emplace(threads, measure_machine_peak(threads)).first->second;
}

}  // namespace tracemod
