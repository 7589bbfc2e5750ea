// CRC32C (Castagnoli), the checksum of saved modules: the SSE4.2 crc32 instruction when the CPU has
// it (checked once at run time, so portable builds get it too), else a table-driven loop.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define TRACEMOD_CRC32C_X86 1
#endif

namespace tracemod::io {

namespace detail {

inline constexpr std::uint32_t crc32c_poly = 0x82F63B78u;  // reflected Castagnoli polynomial

inline constexpr std::array<std::array<std::uint32_t, 256>, 8> crc32c_tables = [] {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) != 0 ? (c >> 1) ^ crc32c_poly : c >> 1;
    t[0][i] = c;
  }
  for (std::size_t s = 1; s < 8; ++s)
    for (std::size_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
  return t;
}();

/// Slicing-by-8 over `n` bytes; `crc` is the running (inverted) state.
inline std::uint32_t crc32c_table(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept {
  const auto& t = crc32c_tables;
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);  // little-endian: the file format requires it
    w ^= crc;
    crc = t[7][w & 0xFF] ^ t[6][(w >> 8) & 0xFF] ^ t[5][(w >> 16) & 0xFF] ^ t[4][(w >> 24) & 0xFF] ^
          t[3][(w >> 32) & 0xFF] ^ t[2][(w >> 40) & 0xFF] ^ t[1][(w >> 48) & 0xFF] ^ t[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFFu];
  return crc;
}

#ifdef TRACEMOD_CRC32C_X86
__attribute__((target("sse4.2"))) inline std::uint32_t crc32c_sse42(std::uint32_t crc, const unsigned char* p,
                                                                    std::size_t n) noexcept {
  std::uint64_t c = crc;
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<std::uint32_t>(c);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

inline bool cpu_has_sse42() noexcept {
  static const bool has = __builtin_cpu_supports("sse4.2") != 0;
  return has;
}
#endif

}  // namespace detail

/// CRC32C of `bytes`, continuing from `crc` (the CRC of the bytes before; 0 to start).
[[nodiscard]] inline std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t crc = 0) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::uint32_t state = ~crc;
#ifdef TRACEMOD_CRC32C_X86
  if (detail::cpu_has_sse42()) return ~detail::crc32c_sse42(state, p, bytes.size());
#endif
  return ~detail::crc32c_table(state, p, bytes.size());
}

}  // namespace tracemod::io
