// Benchmarks at 1 and 2 threads: an argument "threads" that the body applies for its duration.
// Threaded runs are timed in wall-clock time (UseRealTime): CPU time would count one thread only.
// run_scaling times both counts in one benchmark, alternated, for the ratio of 2 threads over 1.
#pragma once

#include <tracemod/core/parallel.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace tracemod::bench {

/// The thread counts every threaded benchmark reports.
inline constexpr std::int64_t bench_thread_counts[] = {1, 2};

/// Sets tmod::set_num_threads(state.range(arg)) until the end of the scope.
class scoped_threads {
 public:
  scoped_threads(const benchmark::State& state, int arg) : before_(get_num_threads()) {
    set_num_threads(static_cast<int>(state.range(arg)));
  }
  ~scoped_threads() { set_num_threads(before_); }
  scoped_threads(const scoped_threads&) = delete;
  scoped_threads& operator=(const scoped_threads&) = delete;

 private:
  int before_;
};

/// For ->Apply: one argument, "threads", over bench_thread_counts, in wall-clock time.
inline void over_threads(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->UseRealTime();
  for (const std::int64_t t : bench_thread_counts) b->Arg(t);
}

/// For ->Apply on a benchmark with a size argument: (size, threads) for every size given before.
inline void sizes_over_threads(benchmark::internal::Benchmark* b, std::initializer_list<std::int64_t> sizes) {
  b->ArgNames({"n", "threads"})->UseRealTime();
  for (const std::int64_t n : sizes)
    for (const std::int64_t t : bench_thread_counts) b->Args({n, t});
}

/// Calls per block of run_scaling.
inline constexpr int scaling_block_calls = 16;

/// The body of a benchmark of `call` at 1 and at 2 threads, alternated: each iteration runs a block
/// of scaling_block_calls calls at one thread, then a block at two, and times each call but a
/// block's first (which wakes the second thread and leaves the caches as a call at that count
/// does). A block is short (a few ms to tens of ms), so the load of a shared machine, which drifts
/// within seconds and moves a ratio taken between separate runs at 1 and 2 threads by up to 0.07,
/// reaches both counts alike; it is long enough that each count runs in its steady state, as
/// between a network's layers (alternating single calls measured 2-thread calls up to 20 % slower:
/// the idle second core had to be woken and refilled each time). Counters: the medians of the
/// timed calls (ms_1t, ms_2t), speedup = ms_1t / ms_2t, and the same from the fastest calls
/// (min_1t, min_2t, speedup_min: the neighbours' load only ever adds time). The iteration time is
/// the timed calls' (for ->UseManualTime()).
template <class Call>
void run_scaling(benchmark::State& state, Call&& call) {
  const int before = get_num_threads();
  std::vector<double> one, two;
  // Times in ms of a block's calls after the first, appended to `times`; returns their sum in seconds.
  const auto block = [&](int threads, std::vector<double>& times) {
    set_num_threads(threads);
    double seconds = 0;
    for (int i = 0; i < scaling_block_calls; ++i) {
      const auto start = std::chrono::steady_clock::now();
      call();
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      if (i == 0) continue;
      times.push_back(elapsed.count() * 1e3);
      seconds += elapsed.count();
    }
    return seconds;
  };
  for (auto _ : state) state.SetIterationTime(block(1, one) + block(2, two));
  set_num_threads(before);
  const auto median = [](std::vector<double>& times) {
    const auto mid = times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2);
    std::nth_element(times.begin(), mid, times.end());
    return *mid;
  };
  const double ms_1t = median(one), ms_2t = median(two);
  const double min_1t = *std::min_element(one.begin(), one.end()), min_2t = *std::min_element(two.begin(), two.end());
  state.counters["ms_1t"] = ms_1t;
  state.counters["ms_2t"] = ms_2t;
  state.counters["speedup"] = ms_1t / ms_2t;
  state.counters["min_1t"] = min_1t;
  state.counters["min_2t"] = min_2t;
  state.counters["speedup_min"] = min_1t / min_2t;
}

}  // namespace tracemod::bench
