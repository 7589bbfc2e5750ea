// A 64-byte aligned, heap-allocated byte buffer shared by tensors (reference counted by Tensor),
// and the pool that recycles large ones.
#pragma once

#include <tracemod/core/error.hpp>

#include <array>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tracemod {

namespace detail {

/// Recycles large buffers. glibc serves requests from 128 KiB up (its default mmap threshold, which
/// it raises only as a side effect of earlier frees) with freshly mapped blocks and unmaps them on
/// free, so every such buffer costs one page fault per 4 KiB page on first touch. That dominates
/// memory-bound ops that allocate their result on every call, and made a traced ResNet-18's time
/// depend on what the process had allocated before: 33.7 ms with 0.12 million page faults in one
/// build of bench_passes, 37.2 ms with 0.57 million after a change elsewhere in the process. Freed
/// buffers of at least `threshold` bytes are kept, up to `capacity()` bytes in all, and handed out
/// again for requests of the same size.
class buffer_pool {
 public:
  static constexpr std::size_t alignment = 64;
  static constexpr std::size_t threshold = std::size_t{1} << 17;

  /// The process-wide pool. Never destroyed: tensors in static storage may outlive other statics.
  static buffer_pool& instance() {
    static buffer_pool* pool = new buffer_pool;
    return *pool;
  }

  std::byte* acquire(std::size_t bytes) {
    if (bytes >= threshold) {
      const std::lock_guard lock(mutex_);
      if (const auto it = free_.find(bytes); it != free_.end()) {
        std::byte* p = it->second;
        free_.erase(it);
        cached_ -= bytes;
        return p;
      }
    }
    return static_cast<std::byte*>(::operator new(bytes, std::align_val_t{alignment}));
  }

  void release(std::byte* p, std::size_t bytes) noexcept {
    if (bytes >= threshold) {
      const std::lock_guard lock(mutex_);
      if (cached_ + bytes <= capacity_) {
        free_.emplace(bytes, p);
        cached_ += bytes;
        return;
      }
    }
    ::operator delete(p, std::align_val_t{alignment});
  }

  /// Bytes the pool may keep; 0 disables it and frees what it holds.
  void set_capacity(std::size_t bytes) {
    const std::lock_guard lock(mutex_);
    capacity_ = bytes;
    for (auto it = free_.begin(); it != free_.end() && cached_ > capacity_;) {
      cached_ -= it->first;
      ::operator delete(it->second, std::align_val_t{alignment});
      it = free_.erase(it);
    }
  }
  [[nodiscard]] std::size_t capacity() const {
    const std::lock_guard lock(mutex_);
    return capacity_;
  }
  [[nodiscard]] std::size_t cached_bytes() const {
    const std::lock_guard lock(mutex_);
    return cached_;
  }

 private:
  buffer_pool() = default;

  mutable std::mutex mutex_;
  std::unordered_multimap<std::size_t, std::byte*> free_;
  std::size_t cached_ = 0;
  std::size_t capacity_ = std::size_t{512} << 20;
};

}  // namespace detail

/// How many bytes of freed large tensor buffers (>= 128 KiB each) tracemod keeps for reuse
/// (default 512 MiB); 0 turns the recycling off.
inline void set_buffer_cache_capacity(std::size_t bytes) { detail::buffer_pool::instance().set_capacity(bytes); }

/// Names data derived from a buffer's bytes: `kind`, a tag type standing for what is computed (one
/// per kind of datum), and the integers it depends on besides the bytes (the shape it is derived
/// for, say; at most max_params). Comparing two keys is a few integer compares. A tag may name its
/// datum for error messages (`static constexpr const char* name = "winograd filters";`); without
/// one, messages show the compiler's name of the type.
struct derived_key {
  static constexpr std::size_t max_params = 8;

  std::type_index kind;
  const char* name;  ///< for messages only; not compared
  std::array<std::int64_t, max_params> params{};
  std::size_t count = 0;

  /// The key of datum Tag depending on `values` (value_error past max_params).
  template <class Tag, class Range>
  [[nodiscard]] static derived_key of(const Range& values) {
    derived_key key{std::type_index(typeid(Tag)), name_of<Tag>()};
    for (const auto v : values) {
      if (key.count == max_params)
        throw value_error(std::string("derived_key: ") + key.name + " depends on more than 8 parameters");
      key.params[key.count++] = static_cast<std::int64_t>(v);
    }
    return key;
  }
  template <class Tag>
  [[nodiscard]] static derived_key of(std::initializer_list<std::int64_t> values = {}) {
    return of<Tag, std::initializer_list<std::int64_t>>(values);
  }

  bool operator==(const derived_key& other) const noexcept {
    return kind == other.kind && count == other.count && params == other.params;
  }

 private:
  template <class Tag>
  static const char* name_of() noexcept {
    if constexpr (requires { { Tag::name } -> std::convertible_to<const char*>; })
      return Tag::name;
    else
      return typeid(Tag).name();
  }
};

class Storage {
 public:
  static constexpr std::size_t alignment = detail::buffer_pool::alignment;

  // Rounded up to whole cache lines plus one (never zero-sized), so equal tensor sizes map to
  // equal allocation sizes in the pool.
  explicit Storage(std::size_t bytes)
      : bytes_(bytes), allocated_((bytes + alignment - 1) / alignment * alignment + alignment),
        data_(detail::buffer_pool::instance().acquire(allocated_)) {}
  /// Refers to `bytes` of memory owned by `owner` (a memory-mapped file) instead of allocating:
  /// loaded weights are used in place. `data` must be 64-byte aligned and writable (map the file
  /// copy-on-write so that writes never reach it).
  Storage(std::byte* data, std::size_t bytes, std::shared_ptr<const void> owner)
      : bytes_(bytes), allocated_(0), data_(data), owner_(std::move(owner)) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (!owner_) detail::buffer_pool::instance().release(data_, allocated_);
  }

  [[nodiscard]] std::byte* data() noexcept { return data_; }
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

  /// From now on tensors over this buffer refuse mutable access (Tensor::data); there is no way back.
  void make_read_only() noexcept { read_only_.store(true); }
  [[nodiscard]] bool read_only() const noexcept { return read_only_.load(); }

  /// Data derived from a read-only buffer's bytes (a kernel's pre-transformed weights), made by
  /// make() on the first request for `key` and kept as long as the buffer: its bytes cannot change,
  /// so it can never go stale. Thread-safe; make() runs once per key.
  template <class T, class Make>
  [[nodiscard]] std::shared_ptr<const T> derived(const derived_key& key, Make&& make) const {
    if (!read_only())
      throw value_error(std::string("Storage.derived: ") + key.name +
                        " would be derived from a buffer that may still change (make it read-only first)");
    const std::lock_guard lock(derived_mutex_);
    for (const auto& [k, v] : derived_)
      if (k == key) return std::static_pointer_cast<const T>(v);
    auto made = std::make_shared<const T>(make());
    derived_.emplace_back(key, made);
    return made;
  }

 private:
  std::size_t bytes_;
  std::size_t allocated_;
  std::byte* data_;
  std::shared_ptr<const void> owner_;  // set for memory owned elsewhere
  std::atomic<bool> read_only_{false};
  mutable std::mutex derived_mutex_;
  mutable std::vector<std::pair<derived_key, std::shared_ptr<const void>>> derived_;
};

}  // namespace tracemod
