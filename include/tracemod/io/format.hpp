// The constants and the fixed header of tracemod's saved-module format (docs/file-format.md), shared
// by the writer (io/save.hpp) and the reader (io/load.hpp).
#pragma once

#include <tracemod/core/dim.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/io/crc32c.hpp>
#include <tracemod/version.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

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

/// Operator names of symbolic dims in a file: a dim is an integer, {"sym": name} or {op: [a, b]}.
inline constexpr std::array<std::pair<DimExpr::Kind, std::string_view>, 5> dim_ops{
    {{DimExpr::Kind::add, "add"}, {DimExpr::Kind::sub, "sub"}, {DimExpr::Kind::mul, "mul"},
     {DimExpr::Kind::floordiv, "floordiv"}, {DimExpr::Kind::ceildiv, "ceildiv"}}};

inline json dim_json(const DimExpr& d) {
  if (d.is_constant()) return d.value();
  if (d.is_symbol()) return json{{"sym", d.name()}};
  for (const auto& [k, name] : dim_ops)
    if (k == d.kind()) return json{{std::string(name), json::array({dim_json(d.lhs()), dim_json(d.rhs())})}};
  return nullptr;
}

inline json dims_json(const Dims& d) {
  json a = json::array();
  for (const DimExpr& e : d) a.push_back(dim_json(e));
  return a;
}

/// The dim a file describes; throws format_error (prefixed by `where`) for a malformed one.
inline DimExpr dim_from_json(const json& j, const std::string& where, int depth = 0) {
  const auto bad = [&] { return format_error("load: " + where + ": malformed symbolic dim " + j.dump()); };
  if (depth > max_nesting) throw bad();
  if (j.is_number_integer()) return j.get<std::int64_t>();
  if (!j.is_object() || j.size() != 1) throw bad();
  const std::string& key = j.begin().key();
  const json& v = j.begin().value();
  if (key == "sym") {
    if (!v.is_string() || v.get<std::string>().empty()) throw bad();
    return DimExpr::symbol(v.get<std::string>());
  }
  if (!v.is_array() || v.size() != 2) throw bad();
  const DimExpr a = dim_from_json(v[0], where, depth + 1), b = dim_from_json(v[1], where, depth + 1);
  if (key == "add") return a + b;
  if (key == "sub") return a - b;
  if (key == "mul") return a * b;
  try {
    if (key == "floordiv") return a / b;
    if (key == "ceildiv") return ceil_div(a, b);
  } catch (const shape_error&) {
    throw bad();
  }
  throw bad();
}

/// The dims of a node of rank `rank` a file describes; format_error for a malformed list.
inline Dims dims_from_json(const json& a, std::size_t rank, const std::string& where) {
  if (!a.is_array() || a.size() != rank)
    throw format_error("load: " + where + ": dims " + a.dump() + " do not have the rank of its shape");
  Dims d;
  for (const json& x : a) d.push_back(dim_from_json(x, where));
  return d;
}

/// A node's ShapeValue (core/dim.hpp): {"dims": [...], "example": [...]}.
inline json shape_value_json(const ShapeValue& v) { return json{{"dims", dims_json(v.dims)}, {"example", v.example}}; }

/// The ShapeValue of a node whose shape is `shape` a file describes: as many elements as the node
/// (an int32 of rank 0 or 1), each constant equal to its example; format_error otherwise.
inline ShapeValue shape_value_from_json(const json& j, const Shape& shape, const std::string& where) {
  const auto bad = [&](const std::string& why) { return format_error("load: " + where + ": value " + j.dump() + " " + why); };
  if (!j.is_object() || !j.contains("example") || !j["example"].is_array() || !j.contains("dims")) throw bad("is malformed");
  if (shape.rank() > 1 || j["example"].size() != static_cast<std::size_t>(shape.numel()))
    throw bad("does not have the node's " + std::to_string(shape.numel()) + " elements");
  ShapeValue v;
  v.dims = dims_from_json(j["dims"], j["example"].size(), where);
  for (const json& x : j["example"]) {
    if (!x.is_number_integer()) throw bad("has an example that is not an integer");
    v.example.push_back(x.get<std::int64_t>());
  }
  for (std::size_t i = 0; i < v.dims.size(); ++i)
    if (v.dims[i].is_constant() && v.dims[i].value() != v.example[i]) throw bad("has a constant that is not its example");
  return v;
}

}  // namespace detail
}  // namespace io
}  // namespace tracemod
