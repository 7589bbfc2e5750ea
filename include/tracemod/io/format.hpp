// The constants and the fixed header of tracemod's saved-module format (docs/file-format.md), shared
// by the writer (io/save.hpp) and the reader (io/load.hpp).
#pragma once

#include <tracemod/io/crc32c.hpp>
#include <tracemod/version.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace tracemod {

namespace io {

/// The format version this library writes; it reads every version from 1 up to this one. Version 2
/// adds "alias" module attributes (a module held by several attributes is stored once).
inline constexpr std::uint32_t format_version = 2;
inline constexpr std::array<char, 8> file_magic{'\x89', 'T', 'M', 'O', 'D', '\r', '\n', '\x1a'};
inline constexpr std::size_t header_size = 64;
inline constexpr std::size_t blob_alignment = 64;
inline constexpr std::uint32_t byte_order_mark = 0x01020304u;
/// Nesting limit of values and output trees in a file (a hostile file must not exhaust the stack).
inline constexpr int max_nesting = 64;

namespace detail {

using json = nlohmann::json;

/// The fixed header, little-endian, at offset 0.
struct header {
  std::uint32_t version = format_version;
  std::uint32_t byte_order = byte_order_mark;
  std::uint32_t library_version = TRACEMOD_VERSION;
  std::uint32_t json_crc = 0;
  std::uint64_t json_offset = header_size;
  std::uint64_t json_size = 0;
  std::uint64_t data_offset = 0;
  std::uint64_t data_size = 0;

  [[nodiscard]] std::array<std::byte, header_size> encode() const {
    std::array<std::byte, header_size> b{};
    std::memcpy(b.data(), file_magic.data(), 8);
    const auto put = [&](std::size_t at, auto v) { std::memcpy(b.data() + at, &v, sizeof v); };
    put(8, version);
    put(12, byte_order);
    put(16, library_version);
    put(20, json_crc);
    put(24, json_offset);
    put(32, json_size);
    put(40, data_offset);
    put(48, data_size);
    put(60, crc32c(std::span(b.data(), 60)));
    return b;
  }
};

inline std::size_t align_up(std::size_t n) { return (n + blob_alignment - 1) / blob_alignment * blob_alignment; }

}  // namespace detail
}  // namespace io
}  // namespace tracemod
