// Two ways of doing one thing timed side by side in one benchmark, alternated in blocks, so that the
// load of a shared machine, which drifts within seconds, reaches both alike: what a ratio between
// them needs (2 threads over 1, tracemod over libtorch).
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace tracemod::bench {

/// Medians and fastest of the timed calls of run_alternated, in ms.
struct alternated_times {
  double median_a, median_b, min_a, min_b;
};

/// The body of a benchmark of `a` against `b`: each iteration runs a block of `block_calls` calls
/// of a, then a block of b, and times each call but a block's first (which leaves the caches, and
/// the threads of a thread pool, as calls of that kind do, so each block runs in its steady state).
/// The iteration time is the timed calls' (for ->UseManualTime()).
template <class A, class B>
alternated_times run_alternated(benchmark::State& state, int block_calls, A&& a, B&& b) {
  std::vector<double> times_a, times_b;
  // Times in ms of a block's calls after the first, appended to `times`; returns their sum in seconds.
  const auto block = [block_calls](auto& call, std::vector<double>& times) {
    double seconds = 0;
    for (int i = 0; i < block_calls; ++i) {
      const auto start = std::chrono::steady_clock::now();
      call();
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      if (i == 0) continue;
      times.push_back(elapsed.count() * 1e3);
      seconds += elapsed.count();
    }
    return seconds;
  };
  for (auto _ : state) state.SetIterationTime(block(a, times_a) + block(b, times_b));
  const auto median = [](std::vector<double>& times) {
    const auto mid = times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2);
    std::nth_element(times.begin(), mid, times.end());
    return *mid;
  };
  if (times_a.empty() || times_b.empty()) return {0, 0, 0, 0};
  return {median(times_a), median(times_b), *std::min_element(times_a.begin(), times_a.end()),
          *std::min_element(times_b.begin(), times_b.end())};
}

}  // namespace tracemod::bench
