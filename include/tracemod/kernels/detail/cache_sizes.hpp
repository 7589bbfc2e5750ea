// The data cache sizes of the machine the program runs on, read once: GEMM and convolution blocks
// are sized from them (gemm_driver.hpp) instead of from constants tuned on one host.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#if defined(__unix__)
#include <unistd.h>
#endif

namespace tracemod::kernels::detail {

struct cache_sizes_t {
  std::int64_t l1d, l2;  ///< bytes per core
};

/// Used when the system says nothing: 32 KiB L1d and 1 MiB L2 (2020s x86 and Arm server cores
/// have at least this much).
inline constexpr cache_sizes_t fallback_cache_sizes{32 << 10, 1 << 20};

/// Size in bytes of cpu0's data or unified cache of `level` per /sys/devices/system/cpu, 0 if unknown.
inline std::int64_t sysfs_cache_size(int level) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int l = 0;
    std::string type, size;
    if (!(level_file >> l) || !(type_file >> type) || !(size_file >> size)) continue;
    if (l != level || type == "Instruction" || size.empty()) continue;
    std::int64_t value = 0;
    std::size_t i = 0;
    for (; i < size.size() && size[i] >= '0' && size[i] <= '9'; ++i) value = value * 10 + (size[i] - '0');
    const char unit = i < size.size() ? size[i] : ' ';
    return unit == 'K' ? value << 10 : unit == 'M' ? value << 20 : value;
  }
  return 0;
}

/// sysconf first (glibc reads CPUID), then sysfs, then the fallback, per level.
inline cache_sizes_t detect_cache_sizes() {
  cache_sizes_t c{0, 0};
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
  c.l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE);
  c.l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  if (c.l1d <= 0) c.l1d = sysfs_cache_size(1);
  if (c.l2 <= 0) c.l2 = sysfs_cache_size(2);
  if (c.l1d <= 0) c.l1d = fallback_cache_sizes.l1d;
  if (c.l2 <= 0) c.l2 = fallback_cache_sizes.l2;
  return c;
}

/// This machine's cache sizes, detected on first use.
inline const cache_sizes_t& cache_sizes() {
  static const cache_sizes_t sizes = detect_cache_sizes();
  return sizes;
}

}  // namespace tracemod::kernels::detail
