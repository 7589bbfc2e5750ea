// Benchmarks at 1 and 2 threads: an argument "threads" that the body applies for its duration.
// Threaded runs are timed in wall-clock time (UseRealTime): CPU time would count one thread only.
// run_scaling times both counts in one benchmark, alternated, for the ratio of 2 threads over 1.
#pragma once

#include <tracemod/core/parallel.hpp>

#include <alternated.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>

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

/// The body of a benchmark of `call` at 1 and at 2 threads, alternated (run_alternated): blocks of
/// scaling_block_calls calls at one thread, then at two, each block's first call untimed (it wakes
/// the second thread). A block is short (a few ms to tens of ms), so the neighbours' load on a
/// shared machine, which drifts within seconds and moves a ratio taken between separate runs at 1
/// and 2 threads by up to 0.07, reaches both counts alike; it is long enough that each count runs
/// in its steady state, as between a network's layers (alternating single calls, with one untimed
/// call before each, measured 2-thread calls 15-40 % slower than in a run of them: the second
/// core, idle during the 1-thread calls, had to be woken and refilled each time). Counters: the
/// medians of the timed calls (ms_1t, ms_2t), speedup = ms_1t / ms_2t, and the same from the
/// fastest calls (min_1t, min_2t, speedup_min).
template <class Call>
void run_scaling(benchmark::State& state, Call&& call, int block_calls = scaling_block_calls) {
  const int before = get_num_threads();
  const alternated_times t = run_alternated(
      state, block_calls,
      [&] {
        set_num_threads(1);
        call();
      },
      [&] {
        set_num_threads(2);
        call();
      });
  set_num_threads(before);
  state.counters["ms_1t"] = t.median_a;
  state.counters["ms_2t"] = t.median_b;
  state.counters["speedup"] = t.median_a / t.median_b;
  state.counters["min_1t"] = t.min_a;
  state.counters["min_2t"] = t.min_b;
  state.counters["speedup_min"] = t.min_a / t.min_b;
}

}  // namespace tracemod::bench
