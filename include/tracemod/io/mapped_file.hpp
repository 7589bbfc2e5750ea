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
#include <string_view>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tracemod::io {

class MappedFile {
 public:
  /// How a file is mapped. `copy_on_write` (load's weights): readable and writable, pages faulted in
  /// as they are touched. `read_whole` (a parser that reads every byte once): read-only, every page
  /// mapped up front (MAP_POPULATE: one system call instead of a fault per few pages, and no page is
  /// copied, as a writable mapping's population would); writing through data() then faults.
  enum class access { copy_on_write, read_whole };

  /// Maps `path`; throws format_error, prefixed by `who`, naming the file and the system's reason.
  static std::shared_ptr<MappedFile> open(const std::filesystem::path& path, std::string_view who = "load",
                                          access mode = access::copy_on_write) {
    const auto fail = [&](const std::string& what) {
      return format_error(std::string(who) + ": cannot " + what + " '" + path.string() + "': " + std::strerror(errno));
    };
    // Refused before opening: opening a FIFO for reading blocks until a writer comes, and opening
    // a device may act on it. O_NONBLOCK covers a path replaced between the stat and the open.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw fail("open");
    if (!S_ISREG(st.st_mode)) throw not_regular(who, path, st.st_mode);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw fail("open");
    if (::fstat(fd, &st) != 0) {
      const auto e = fail("stat");
      ::close(fd);
      throw e;
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw not_regular(who, path, st.st_mode);
    }
    auto m = std::shared_ptr<MappedFile>(new MappedFile);
    m->size_ = static_cast<std::size_t>(st.st_size);
    if (m->size_ > 0) {
      const bool whole = mode == access::read_whole;
      void* p = ::mmap(nullptr, m->size_, whole ? PROT_READ : PROT_READ | PROT_WRITE,
                       whole ? MAP_PRIVATE | MAP_POPULATE : MAP_PRIVATE, fd, 0);
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
  static format_error not_regular(std::string_view who, const std::filesystem::path& path, mode_t mode) {
    const char* kind = S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISSOCK(mode) ? "a socket"
                       : S_ISCHR(mode) || S_ISBLK(mode) ? "a device" : "a special file";
    return format_error(std::string(who) + ": '" + path.string() + "' is " + kind + ", not a regular file");
  }
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace tracemod::io
