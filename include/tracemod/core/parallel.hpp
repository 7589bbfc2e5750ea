// The one place kernels get threads: tmod::parallel_for, and the thread count PyTorch-style
// (tmod::set_num_threads / tmod::get_num_threads).
//
// parallel_for(begin, end, grain, f) calls f(lo, hi) on disjoint sub-ranges that cover [begin, end).
// The split depends only on (begin, end, grain, get_num_threads()), never on timing, so a kernel
// that gives every output element to exactly one call is bit-identical at any thread count.
// Ranges shorter than 2 * grain run on the calling thread. A call made from inside another
// parallel_for runs serially (nested parallelism is off).
//
// Backend: OpenMP when the translation unit is compiled with it (the tracemod::tracemod CMake target
// adds it when found), otherwise serial. A program that wants TBB or its own pool defines
// TRACEMOD_PARALLEL_BACKEND_CUSTOM before including tracemod and provides
//   namespace tracemod::detail { void parallel_run(int threads, const std::function<void(int)>& body); }
// which must call body(t) once for each t in [0, threads) and return when all calls have returned.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

#if !defined(TRACEMOD_PARALLEL_BACKEND_CUSTOM) && defined(_OPENMP)
#include <omp.h>
#define TRACEMOD_PARALLEL_BACKEND_OPENMP 1
#endif

namespace tracemod {

namespace detail {

inline int hardware_threads() noexcept {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

inline std::atomic<int>& num_threads_setting() noexcept {
  static std::atomic<int> n{hardware_threads()};
  return n;
}

inline bool& inside_parallel_region() noexcept {
  thread_local bool inside = false;
  return inside;
}

#if defined(TRACEMOD_PARALLEL_BACKEND_CUSTOM)
void parallel_run(int threads, const std::function<void(int)>& body);
#elif defined(TRACEMOD_PARALLEL_BACKEND_OPENMP)
template <class Body>
void parallel_run(int threads, const Body& body) {
#pragma omp parallel num_threads(threads)
  body(omp_get_thread_num());
}
#else
template <class Body>
void parallel_run(int threads, const Body& body) {
  for (int t = 0; t < threads; ++t) body(t);
}
#endif

}  // namespace detail

/// Threads the kernels use from now on (n >= 1; values below are clamped to 1).
inline void set_num_threads(int n) noexcept { detail::num_threads_setting().store(std::max(1, n)); }
/// Threads the kernels use; defaults to the number of hardware threads.
[[nodiscard]] inline int get_num_threads() noexcept { return detail::num_threads_setting().load(); }
/// Whether this build runs kernels on several threads at all.
[[nodiscard]] constexpr bool parallel_backend_available() noexcept {
#if defined(TRACEMOD_PARALLEL_BACKEND_OPENMP) || defined(TRACEMOD_PARALLEL_BACKEND_CUSTOM)
  return true;
#else
  return false;
#endif
}

/// Calls f(lo, hi) over disjoint chunks of [begin, end) of at least `grain` indices each
/// (except when the whole range is shorter), on up to get_num_threads() threads.
template <class F>
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, F&& f) {
  const std::int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t max_chunks = n / grain;
  const int threads = static_cast<int>(std::min<std::int64_t>(get_num_threads(), max_chunks));
  if (!parallel_backend_available() || threads <= 1 || detail::inside_parallel_region()) {
    f(begin, end);
    return;
  }
  // Static, balanced split: chunk t is [begin + t*n/threads, begin + (t+1)*n/threads).
  detail::parallel_run(threads, [&](int t) {
    const std::int64_t lo = begin + n * t / threads;
    const std::int64_t hi = begin + n * (t + 1) / threads;
    detail::inside_parallel_region() = true;
    f(lo, hi);
    detail::inside_parallel_region() = false;
  });
}

}  // namespace tracemod
