// Benchmarks at 1 and 2 threads: an argument "threads" that the body applies for its duration.
// Threaded runs are timed in wall-clock time (UseRealTime): CPU time would count one thread only.
#pragma once

#include <tracemod/core/parallel.hpp>

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

}  // namespace tracemod::bench
