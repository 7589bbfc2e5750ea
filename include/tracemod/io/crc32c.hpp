// CRC32C (Castagnoli), the checksum of saved modules: the SSE4.2 crc32 instruction in three
// interleaved streams when the CPU has it (checked once at run time, so portable builds get it too),
// else a table-driven loop (slicing-by-8). Both are tested against each other and the check values.
#pragma once

#include <tracemod/core/parallel.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

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
/// The crc32 instruction over 8-byte words, one stream (then bytes for the tail).
__attribute__((target("sse4.2"))) inline std::uint32_t crc32c_sse42_serial(std::uint32_t crc, const unsigned char* p,
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

/// The state after `len` zero bytes, as a linear map of the state before (CRCs are linear over
/// GF(2)): four byte-indexed tables, so that crc(A || B) = shift_|B|(crc(A)) ^ crc_from_0(B).
struct crc32c_shift {
  std::array<std::array<std::uint32_t, 256>, 4> t{};

  explicit crc32c_shift(std::size_t len) noexcept {
    static constexpr std::array<unsigned char, 64> zeros{};
    std::array<std::uint32_t, 32> basis{};
    for (std::size_t bit = 0; bit < 32; ++bit) {
      std::uint32_t c = 1u << bit;
      for (std::size_t left = len; left > 0;) {
        const std::size_t k = left < zeros.size() ? left : zeros.size();
        c = crc32c_sse42_serial(c, zeros.data(), k);
        left -= k;
      }
      basis[bit] = c;
    }
    build(basis);
  }
  [[nodiscard]] std::uint32_t operator()(std::uint32_t c) const noexcept {
    return t[0][c & 0xFFu] ^ t[1][(c >> 8) & 0xFFu] ^ t[2][(c >> 16) & 0xFFu] ^ t[3][c >> 24];
  }
  /// The shift by twice this one's length (the map applied twice), without running the CRC over
  /// the zeros: how long shifts are built cheaply.
  [[nodiscard]] crc32c_shift doubled() const noexcept {
    std::array<std::uint32_t, 32> basis{};
    for (std::size_t bit = 0; bit < 32; ++bit) basis[bit] = (*this)((*this)(1u << bit));
    crc32c_shift s;
    s.build(basis);
    return s;
  }

 private:
  crc32c_shift() = default;
  /// Byte-indexed tables of the linear map whose image of bit i is basis[i].
  void build(const std::array<std::uint32_t, 32>& basis) noexcept {
    for (std::size_t byte = 0; byte < 4; ++byte)
      for (std::uint32_t v = 0; v < 256; ++v) {
        std::uint32_t r = 0;
        for (std::size_t b = 0; b < 8; ++b)
          if ((v >> b) & 1u) r ^= basis[byte * 8 + b];
        t[byte][v] = r;
      }
  }
};

/// Three independent crc32 streams over consecutive blocks of `block` bytes (the instruction's
/// latency is three cycles, its throughput one per cycle), combined with `shift` (by `block`).
__attribute__((target("sse4.2"))) inline std::uint32_t crc32c_sse42_3way(std::uint32_t crc, const unsigned char*& p,
                                                                         std::size_t& n, std::size_t block,
                                                                         const crc32c_shift& shift) noexcept {
  while (n >= 3 * block) {
    std::uint64_t c0 = crc, c1 = 0, c2 = 0;
    for (std::size_t i = 0; i < block; i += 8) {
      std::uint64_t w0, w1, w2;
      std::memcpy(&w0, p + i, 8);
      std::memcpy(&w1, p + block + i, 8);
      std::memcpy(&w2, p + 2 * block + i, 8);
      c0 = _mm_crc32_u64(c0, w0);
      c1 = _mm_crc32_u64(c1, w1);
      c2 = _mm_crc32_u64(c2, w2);
    }
    crc = shift(shift(static_cast<std::uint32_t>(c0)) ^ static_cast<std::uint32_t>(c1)) ^ static_cast<std::uint32_t>(c2);
    p += 3 * block;
    n -= 3 * block;
  }
  return crc;
}

inline constexpr std::size_t crc32c_long_block = 8192;
inline constexpr std::size_t crc32c_short_block = 256;

/// Long blocks, then short ones, then one stream for the rest.
inline std::uint32_t crc32c_sse42(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept {
  static const crc32c_shift long_shift(crc32c_long_block);
  static const crc32c_shift short_shift(crc32c_short_block);
  crc = crc32c_sse42_3way(crc, p, n, crc32c_long_block, long_shift);
  crc = crc32c_sse42_3way(crc, p, n, crc32c_short_block, short_shift);
  return crc32c_sse42_serial(crc, p, n);
}

inline bool cpu_has_sse42() noexcept {
  static const bool has = __builtin_cpu_supports("sse4.2") != 0;
  return has;
}

/// Pieces of a CRC split across threads (crc32c_parallel).
inline constexpr std::size_t crc32c_piece = std::size_t{1} << 20;

/// The shift by crc32c_piece bytes: 64 doubled 14 times.
inline const crc32c_shift& crc32c_piece_shift() {
  static const crc32c_shift s = [] {
    crc32c_shift x(64);
    for (std::size_t len = 64; len < crc32c_piece; len *= 2) x = x.doubled();
    return x;
  }();
  return s;
}
#endif

}  // namespace detail

/// The portable path, whatever the CPU (tests compare it with the hardware one).
[[nodiscard]] inline std::uint32_t crc32c_portable(std::span<const std::byte> bytes, std::uint32_t crc = 0) noexcept {
  return ~detail::crc32c_table(~crc, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

/// CRC32C of `bytes`, continuing from `crc` (the CRC of the bytes before; 0 to start).
[[nodiscard]] inline std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t crc = 0) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::uint32_t state = ~crc;
#ifdef TRACEMOD_CRC32C_X86
  if (detail::cpu_has_sse42()) return ~detail::crc32c_sse42(state, p, bytes.size());
#endif
  return ~detail::crc32c_table(state, p, bytes.size());
}

/// crc32c(bytes) computed on up to tmod::get_num_threads() threads: the whole pieces of
/// detail::crc32c_piece bytes each from state zero, in parallel, then combined in order
/// (crc(A || B) = shift_|B|(crc(A)) ^ crc_from_0(B)) and the tail continued serially. The same
/// value as crc32c at any thread count; serial below two pieces, without SSE4.2 or without threads.
[[nodiscard]] inline std::uint32_t crc32c_parallel(std::span<const std::byte> bytes) {
#ifdef TRACEMOD_CRC32C_X86
  const std::size_t pieces = bytes.size() / detail::crc32c_piece;
  if (detail::cpu_has_sse42() && parallel_chunk_count(0, static_cast<std::int64_t>(pieces), 1) > 1) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const detail::crc32c_shift& shift = detail::crc32c_piece_shift();
    std::vector<std::uint32_t> raw(pieces);
    parallel_for(0, static_cast<std::int64_t>(pieces), 1, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t i = lo; i < hi; ++i)
        raw[static_cast<std::size_t>(i)] =
            detail::crc32c_sse42(0, p + static_cast<std::size_t>(i) * detail::crc32c_piece, detail::crc32c_piece);
    });
    std::uint32_t state = ~0u;
    for (const std::uint32_t r : raw) state = shift(state) ^ r;
    const std::size_t done = pieces * detail::crc32c_piece;
    return ~detail::crc32c_sse42(state, p + done, bytes.size() - done);
  }
#endif
  return crc32c(bytes);
}

}  // namespace tracemod::io
