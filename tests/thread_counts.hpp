// Bit-identity across thread counts: a kernel run at 1, 2, 3 and 4 threads must give the same bits.
// Grains are lowered to 1 meanwhile, so test-sized problems really are split (the checks could
// not fail otherwise).
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

namespace thread_counts {

/// Every grain 1 for its lifetime.
class fine_grains {
 public:
  fine_grains() : saved_(tracemod::kernels::detail::grains()) {
    tracemod::kernels::detail::grains() = {1, 1, 1, 1};
  }
  ~fine_grains() { tracemod::kernels::detail::grains() = saved_; }
  fine_grains(const fine_grains&) = delete;
  fine_grains& operator=(const fine_grains&) = delete;

 private:
  tracemod::kernels::detail::parallel_grains saved_;
};

[[nodiscard]] inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// run() -> std::vector<float>, the kernel's whole output, at 1 thread and then at 2, 3, 4.
template <class Run>
void check_bit_identical(const std::string& what, const Run& run) {
  const fine_grains fine;
  const int before = tracemod::get_num_threads();
  tracemod::set_num_threads(1);
  const std::vector<float> one = run();
  for (int threads = 2; threads <= 4; ++threads) {
    tracemod::set_num_threads(threads);
    const std::vector<float> many = run();
    CHECK_MESSAGE(same_bits(one, many), what << ": " << threads << " threads differ from 1");
  }
  tracemod::set_num_threads(before);
}

}  // namespace thread_counts
