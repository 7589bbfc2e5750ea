// The buffer pool behind Storage (core/storage.hpp): freed buffers of >= 128 KiB come back for
// requests of the same size, up to the capacity; smaller ones and the overflow are freed. The
// tensors here are above the threshold, so the ASan build checks every byte a reused buffer is
// written through stays inside the block the pool hands back.
#include <tracemod/core/factories.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace tmod_test_core_buffer_pool {

namespace {

namespace tmod = tracemod;
using tmod::detail::buffer_pool;

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t kib = std::size_t{1} << 10;

// Empties the pool, sets a capacity for one test and restores the previous capacity afterwards.
struct pool_capacity {
  std::size_t previous = buffer_pool::instance().capacity();
  explicit pool_capacity(std::size_t bytes) {
    tmod::set_buffer_cache_capacity(0);
    tmod::set_buffer_cache_capacity(bytes);
  }
  pool_capacity(const pool_capacity&) = delete;
  pool_capacity& operator=(const pool_capacity&) = delete;
  ~pool_capacity() { tmod::set_buffer_cache_capacity(previous); }
};

std::size_t cached() { return buffer_pool::instance().cached_bytes(); }

// A float tensor of `bytes` bytes, every element written (ASan sees a write past the block).
tmod::Tensor filled(std::size_t bytes, float value) {
  return tmod::full({static_cast<std::int64_t>(bytes / sizeof(float))}, value);
}

}  // namespace

TEST_CASE("buffer pool: a freed large buffer is handed back for the same size, not for another") {
  const pool_capacity guard(64 * mib);
  REQUIRE(cached() == 0);
  const float* first = nullptr;
  {
    const tmod::Tensor t = filled(2 * mib, 1.f);
    first = t.data<float>();
    CHECK(reinterpret_cast<std::uintptr_t>(first) % 64 == 0);
  }
  // Kept: at least the tensor's bytes, rounded up by less than two cache lines.
  const std::size_t kept = cached();
  CHECK(kept >= 2 * mib);
  CHECK(kept < 2 * mib + 128);

  {
    const tmod::Tensor other = filled(3 * mib, 2.f);  // another size: a new buffer
    CHECK(other.data<float>() != first);
    CHECK(cached() == kept);
  }
  const std::size_t both = cached();  // both now kept
  CHECK(both >= kept + 3 * mib);
  CHECK(both < kept + 3 * mib + 128);

  tmod::Tensor again = filled(2 * mib, 3.f);
  CHECK(again.data<float>() == first);
  CHECK(cached() == both - kept);
  CHECK(std::all_of(again.values<float>().begin(), again.values<float>().end(), [](float v) { return v == 3.f; }));
}

TEST_CASE("buffer pool: small buffers are never kept") {
  const pool_capacity guard(64 * mib);
  { const tmod::Tensor t = filled(64 * kib, 1.f); }
  { const tmod::Tensor t = filled(buffer_pool::threshold - 1024, 1.f); }
  CHECK(cached() == 0);
  { const tmod::Tensor t = filled(buffer_pool::threshold, 1.f); }  // the threshold itself is large
  CHECK(cached() > 0);
}

TEST_CASE("buffer pool: the capacity bounds what is kept; lowering it evicts; 0 turns it off") {
  const pool_capacity guard(5 * mib);
  {
    const tmod::Tensor a = filled(2 * mib, 1.f), b = filled(2 * mib, 2.f), c = filled(2 * mib, 3.f);
    CHECK(a.data<float>() != b.data<float>());
  }
  // Two of the three fit in 5 MiB; the third is freed.
  const std::size_t one = cached() / 2;
  CHECK(one >= 2 * mib);
  CHECK(cached() == 2 * one);
  CHECK(buffer_pool::instance().capacity() == 5 * mib);

  tmod::set_buffer_cache_capacity(3 * mib);  // evicts one
  CHECK(cached() == one);
  CHECK(buffer_pool::instance().capacity() == 3 * mib);

  tmod::set_buffer_cache_capacity(0);  // frees everything and keeps nothing more
  CHECK(cached() == 0);
  { const tmod::Tensor t = filled(2 * mib, 1.f); }
  CHECK(cached() == 0);

  tmod::set_buffer_cache_capacity(8 * mib);
  std::optional<tmod::Tensor> t = filled(4 * mib, 1.f);
  t.reset();
  CHECK(cached() >= 4 * mib);
}

}  // namespace tmod_test_core_buffer_pool
