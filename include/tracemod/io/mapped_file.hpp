// A whole file mapped copy-on-write (MAP_PRIVATE): loaded tensors point into it, so the weights are
// used in place; writes to them (load_state_dict, in-place ops) copy the touched pages and never
// reach the file. Shared by every tensor that refers to it and unmapped when the last one goes.
#pragma once

#include <tracemod/core/error.hpp>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tracemod::io {

class MappedFile {
 public:
  /// Maps `path`; throws format_error naming the file and the system's reason.
  static std::shared_ptr<MappedFile> open(const std::filesystem::path& path) {
    const auto fail = [&](const std::string& what) {
      return format_error("load: cannot " + what + " '" + path.string() + "': " + std::strerror(errno));
    };
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw fail("open");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const auto e = fail("stat");
      ::close(fd);
      throw e;
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw format_error("load: '" + path.string() + "' is not a regular file");
    }
    auto m = std::shared_ptr<MappedFile>(new MappedFile);
    m->size_ = static_cast<std::size_t>(st.st_size);
    if (m->size_ > 0) {
      void* p = ::mmap(nullptr, m->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const auto e = fail("map");
        ::close(fd);
        throw e;
      }
      m->data_ = static_cast<std::byte*>(p);
    }
    ::close(fd);
    return m;
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

 private:
  MappedFile() = default;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace tracemod::io
