// Helpers of the save/load tests: a file's bytes, a saved module's bytes, loading from bytes, the
// error a load raises, and a file rebuilt with an edited description or header (fresh checksums),
// to reach the loader's checks behind the checksums.
#pragma once

#include <tracemod/io/serialize.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <span>
#include <sstream>
#include <string>

namespace serialize_test {

namespace tmod = tracemod;
using json = nlohmann::json;

/// The bytes of a file (empty if it cannot be read).
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string bytes_of(const tmod::TracedModule& m) {
  std::ostringstream os;
  tmod::save(m, os);
  return os.str();
}

inline tmod::TracedModule load_bytes(const std::string& s, const tmod::LoadOptions& o = {}) {
  return tmod::load(std::as_bytes(std::span(s.data(), s.size())), o);
}

/// The message of the format_error loading `file` raises, or "(loaded)".
inline std::string load_error(const std::string& file) {
  try {
    (void)load_bytes(file);
  } catch (const tmod::format_error& e) {
    return e.what();
  }
  return "(loaded)";
}

/// `file` with its description edited by `edit`, checksums and offsets recomputed.
inline std::string with_description(const std::string& file, const std::function<void(json&)>& edit) {
  std::uint64_t json_size = 0, data_offset = 0, data_size = 0;
  std::memcpy(&json_size, file.data() + 32, 8);
  std::memcpy(&data_offset, file.data() + 40, 8);
  std::memcpy(&data_size, file.data() + 48, 8);
  json doc = json::parse(file.substr(64, json_size));
  edit(doc);
  const std::string text = doc.dump();
  tmod::io::detail::header h;
  h.json_size = text.size();
  h.json_crc = tmod::io::crc32c(std::as_bytes(std::span(text.data(), text.size())));
  h.data_offset = (64 + text.size() + 63) / 64 * 64;
  h.data_size = data_size;
  const auto head = h.encode();
  std::string out(reinterpret_cast<const char*>(head.data()), head.size());
  out += text;
  out.resize(h.data_offset, '\0');
  out += file.substr(data_offset);
  return out;
}

/// `file` with header byte `at` set to `value` and the header checksum recomputed.
inline std::string with_header_byte(std::string file, std::size_t at, char value) {
  file[at] = value;
  const std::uint32_t crc = tmod::io::crc32c(std::as_bytes(std::span(file.data(), 60)));
  std::memcpy(file.data() + 60, &crc, 4);
  return file;
}

}  // namespace serialize_test
