// The smoke run of the test command (TRACEMOD_BENCH_SMOKE set): every benchmark runs one iteration,
// once, so none can rot without the suite spending minutes timing them. Google Benchmark 1.7's
// --benchmark_min_time and --benchmark_repetitions do not override the MinTime and Repetitions a
// benchmark sets itself, so benchmarks that set them pass their values through these.
#pragma once

#include <cstdlib>

namespace tracemod::bench {

[[nodiscard]] inline bool smoke_run() {
  static const bool on = std::getenv("TRACEMOD_BENCH_SMOKE") != nullptr;
  return on;
}

/// `seconds`, or (smoke run) a time any single iteration exceeds.
[[nodiscard]] inline double min_time(double seconds) { return smoke_run() ? 1e-9 : seconds; }

/// `n`, or (smoke run) 1.
[[nodiscard]] inline int repetitions(int n) { return smoke_run() ? 1 : n; }

}  // namespace tracemod::bench
