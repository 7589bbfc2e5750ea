// Replacing a file all at once: the bytes go to a temporary file in the target's folder, which is
// flushed to disk (fsync) and renamed over the target. A reader sees the old file or the new one,
// never a mix; a failure at any point leaves the old file as it was and removes the temporary one.
// Writing over the file a module was loaded from is safe too: its mapping keeps the old file's
// bytes alive until it is unmapped.
#pragma once

#include <tracemod/core/error.hpp>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tracemod::io {

namespace testing {
/// Failure injection for tests: when >= 0, the AtomicFile write that would make this many
/// successful writes fail instead throws, as a full disk would. Tests only.
inline thread_local std::int64_t fail_after_writes = -1;
}  // namespace testing

class AtomicFile {
 public:
  /// Creates the temporary file next to `target`; throws format_error prefixed by `who`.
  AtomicFile(const std::filesystem::path& target, std::string_view who) : who_(who), target_(target) {
    std::error_code ec;
    // A symbolic link is kept: the file it points to is replaced.
    if (std::filesystem::is_symlink(target_, ec)) {
      const auto resolved = std::filesystem::canonical(target_, ec);
      if (!ec) target_ = resolved;
    }
    struct stat st {};
    const bool exists = ::stat(target_.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) throw format_error(who_ + ": '" + target.string() + "' is a directory");
    if (exists && !S_ISREG(st.st_mode))
      throw format_error(who_ + ": '" + target.string() + "' exists and is not a regular file");
    static std::atomic<unsigned> counter{0};
    const std::filesystem::path folder = target_.has_parent_path() ? target_.parent_path() : ".";
    for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
      // Appended piece by piece: g++ 12 warns (-Wrestrict, falsely) on "." + std::string&&.
      std::string name = ".";
      name += target_.filename().string();
      name += ".tmp";
      name += std::to_string(::getpid());
      name += '.';
      name += std::to_string(counter.fetch_add(1));
      temp_ = folder / name;
      fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ < 0 && errno != EEXIST) break;
    }
    if (fd_ < 0)
      throw format_error(who_ + ": cannot create a file in '" + folder.string() + "' to write '" + target.string() +
                         "': " + std::strerror(errno));
    // The new file keeps the permissions of the one it replaces.
    if (exists) (void)::fchmod(fd_, st.st_mode & 07777);
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  /// Not committed: the temporary file goes, the target stays as it was.
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
  }

  void write(const void* data, std::size_t n) {
    if (testing::fail_after_writes >= 0 && writes_ >= testing::fail_after_writes)
      throw format_error(who_ + ": writing '" + target_.string() + "' failed: injected failure");
    ++writes_;
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ::ssize_t k = ::write(fd_, p, n);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) fail("writing");
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }

  /// Flushes the bytes to disk and renames the file over the target.
  void commit() {
    if (::fsync(fd_) != 0) fail("flushing");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("closing");
    if (::rename(temp_.c_str(), target_.c_str()) != 0) fail("replacing");
    committed_ = true;
    // The rename itself reaches the disk with the folder's entry (best effort: some file systems
    // cannot sync a folder).
    const std::filesystem::path folder = target_.has_parent_path() ? target_.parent_path() : ".";
    const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      (void)::fsync(dir);
      ::close(dir);
    }
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw format_error(who_ + ": " + what + " '" + target_.string() + "' failed: " + std::strerror(errno));
  }
  std::string who_;
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  bool committed_ = false;
  std::int64_t writes_ = 0;
};

/// Writes a file atomically: `fill(AtomicFile&)` writes its bytes, then it replaces `target`.
template <class Fill>
void write_file_atomically(const std::filesystem::path& target, std::string_view who, Fill&& fill) {
  AtomicFile f(target, who);
  fill(f);
  f.commit();
}

}  // namespace tracemod::io
