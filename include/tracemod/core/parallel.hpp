// The one place kernels get threads: tmod::parallel_for, and the thread count PyTorch-style
// (tmod::set_num_threads / tmod::get_num_threads).
//
// parallel_for(begin, end, grain, f) calls f(lo, hi) (or f(chunk, lo, hi)) on disjoint sub-ranges
// that cover [begin, end). The split depends only on (begin, end, grain, get_num_threads()), never
// on timing, so a kernel that gives every output element to exactly one call, and computes it the
// same way wherever the split falls, is bit-identical at any thread count. Ranges shorter than
// 2 * grain run on the calling thread. A call made from inside another parallel_for, or from inside
// an OpenMP parallel region of the program, runs serially (nested parallelism is off). f must not
// throw: kernels validate before they split.
//
// Backend: OpenMP when the translation unit is compiled with it (the tracemod::tracemod CMake target
// adds it when found), otherwise serial. A program that wants TBB or its own pool defines
// TRACEMOD_PARALLEL_BACKEND_CUSTOM before including tracemod and provides
//   namespace tracemod::detail { void parallel_run(int threads, const std::function<void(int)>& body); }
// which must call body(t) once for each t in [0, threads) and return when all calls have returned
// (in any order, on any threads; the calls never wait for each other). docs/kernels.md has a TBB one.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <thread>
#include <type_traits>

#if defined(__linux__)
#include <sched.h>
#endif

#if !defined(TRACEMOD_PARALLEL_BACKEND_CUSTOM) && defined(_OPENMP)
#include <omp.h>
#define TRACEMOD_PARALLEL_BACKEND_OPENMP 1
#endif

namespace tracemod {

namespace detail {

/// CPUs this process may run on: the affinity mask where there is one (containers, taskset),
/// else std::thread::hardware_concurrency().
inline int hardware_threads() noexcept {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

/// OMP_NUM_THREADS when it starts with a positive number (as PyTorch reads it), else
/// hardware_threads().
inline int default_num_threads() noexcept {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && n > 0 && n <= 4096) return static_cast<int>(n);
  }
  return hardware_threads();
}

inline std::atomic<int>& num_threads_setting() noexcept {
  static std::atomic<int> n{default_num_threads()};
  return n;
}

inline bool& inside_parallel_region() noexcept {
  thread_local bool inside = false;
  return inside;
}

/// Whether the calling thread already runs inside a parallel region (ours or the program's).
inline bool nested_call() noexcept {
#if defined(TRACEMOD_PARALLEL_BACKEND_OPENMP)
  if (omp_in_parallel()) return true;
#endif
  return inside_parallel_region();
}

#if defined(TRACEMOD_PARALLEL_BACKEND_CUSTOM)
void parallel_run(int threads, const std::function<void(int)>& body);
#elif defined(TRACEMOD_PARALLEL_BACKEND_OPENMP)
template <class Body>
void parallel_run(int threads, const Body& body) {
  // The team may be smaller than asked (OMP_THREAD_LIMIT, OMP_DYNAMIC): its threads then share
  // the chunks, so every chunk still runs exactly once.
#pragma omp parallel num_threads(threads)
  for (int t = omp_get_thread_num(); t < threads; t += omp_get_num_threads()) body(t);
}
#else
template <class Body>
void parallel_run(int threads, const Body& body) {
  for (int t = 0; t < threads; ++t) body(t);
}
#endif

/// Sees every chunk a parallel_for runs on several threads while it is installed: the profiler's
/// per-thread trace lanes (profile/profiler.hpp). `chunk` is called on the thread that ran the chunk,
/// possibly on several threads at once, with the chunk's index and steady_clock times.
class chunk_observer {
 public:
  virtual void chunk(int index, std::chrono::steady_clock::time_point start,
                     std::chrono::steady_clock::time_point end) noexcept = 0;

 protected:
  ~chunk_observer() = default;
};

/// The installed observer, or null: the only cost parallel_for pays for it is one load per call.
inline std::atomic<chunk_observer*>& installed_chunk_observer() noexcept {
  static std::atomic<chunk_observer*> observer{nullptr};
  return observer;
}

/// Marks the calling thread as inside a region for its lifetime.
class region_guard {
 public:
  region_guard() noexcept : was_(inside_parallel_region()) { inside_parallel_region() = true; }
  ~region_guard() { inside_parallel_region() = was_; }
  region_guard(const region_guard&) = delete;
  region_guard& operator=(const region_guard&) = delete;

 private:
  bool was_;
};

}  // namespace detail

/// Threads the kernels use from now on (n >= 1; values below are clamped to 1).
inline void set_num_threads(int n) noexcept { detail::num_threads_setting().store(std::max(1, n)); }
/// Threads the kernels use; defaults to OMP_NUM_THREADS if set, else the number of CPUs the process
/// may run on.
[[nodiscard]] inline int get_num_threads() noexcept { return detail::num_threads_setting().load(); }
/// Whether this build runs kernels on several threads at all.
[[nodiscard]] constexpr bool parallel_backend_available() noexcept {
#if defined(TRACEMOD_PARALLEL_BACKEND_OPENMP) || defined(TRACEMOD_PARALLEL_BACKEND_CUSTOM)
  return true;
#else
  return false;
#endif
}

/// How many chunks parallel_for(begin, end, grain, f) makes when called now from this thread:
/// 1 when it runs serially. Lets a kernel set up per-chunk scratch before the region.
[[nodiscard]] inline int parallel_chunk_count(std::int64_t begin, std::int64_t end, std::int64_t grain) noexcept {
  const std::int64_t n = end - begin;
  if (n <= 0) return 1;
  const std::int64_t max_chunks = n / std::max<std::int64_t>(grain, 1);
  const int threads = static_cast<int>(std::min<std::int64_t>(get_num_threads(), max_chunks));
  if (!parallel_backend_available() || threads <= 1 || detail::nested_call()) return 1;
  return threads;
}

/// Calls f(lo, hi), or f(chunk, lo, hi) with chunk in [0, parallel_chunk_count(...)), over disjoint
/// chunks of [begin, end) of at least `grain` indices each (except when the whole range is
/// shorter), on up to get_num_threads() threads.
template <class F>
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, F&& f) {
  const auto call = [&f](int chunk, std::int64_t lo, std::int64_t hi) {
    if constexpr (std::is_invocable_v<F&, int, std::int64_t, std::int64_t>)
      f(chunk, lo, hi);
    else
      f(lo, hi);
  };
  const std::int64_t n = end - begin;
  if (n <= 0) return;
  const int threads = parallel_chunk_count(begin, end, grain);
  if (threads <= 1) {
    call(0, begin, end);
    return;
  }
  // Static, balanced split: chunk t is [begin + t*n/threads, begin + (t+1)*n/threads).
  detail::chunk_observer* const observer = detail::installed_chunk_observer().load(std::memory_order_acquire);
  detail::parallel_run(threads, [&](int t) {
    const detail::region_guard inside;
    if (observer == nullptr) {
      call(t, begin + n * t / threads, begin + n * (t + 1) / threads);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    call(t, begin + n * t / threads, begin + n * (t + 1) / threads);
    observer->chunk(t, start, std::chrono::steady_clock::now());
  });
}

}  // namespace tracemod
