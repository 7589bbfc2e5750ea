// A 64-byte aligned, heap-allocated byte buffer shared by tensors (reference counted by Tensor).
#pragma once

#include <tracemod/core/error.hpp>

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>

namespace tracemod {

class Storage {
 public:
  static constexpr std::size_t alignment = 64;

  explicit Storage(std::size_t bytes) : bytes_(bytes) {
    // Round up so the allocation is a whole number of cache lines (and never zero-sized).
    const std::size_t padded = (bytes + alignment - 1) / alignment * alignment + alignment;
    data_ = static_cast<std::byte*>(::operator new(padded, std::align_val_t{alignment}));
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() { ::operator delete(data_, std::align_val_t{alignment}); }

  [[nodiscard]] std::byte* data() noexcept { return data_; }
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace tracemod
