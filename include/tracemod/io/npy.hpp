// NumPy .npy files: read versions 1.0/2.0/3.0, write version 1.0.
//
// Reads little-endian float32, int32 and bool ('|b1') arrays, and float64/int64 arrays converted to them (int64
// values outside the int32 range and finite float64 values outside the float32 range are rejected). C order only. Writes exactly the bytes
// numpy.save writes for the same array, data aligned to 64 bytes.
#pragma once

#include <tracemod/core/dtype.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/io/atomic_file.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod::io {

static_assert(std::endian::native == std::endian::little,
              "tracemod::io .npy support assumes a little-endian host");

namespace detail {

inline constexpr std::string_view npy_magic = "\x93NUMPY";
inline constexpr std::size_t npy_alignment = 64;
/// numpy leaves room after the dict so the leading extent can grow to 21 digits in place.
inline constexpr std::size_t npy_growth_digits = 21;

/// The element encodings a file may hold; `stored` is the tensor dtype they are read into.
struct npy_dtype {
  std::string_view descr;
  std::size_t itemsize;
  DType stored;
};
inline constexpr std::array<npy_dtype, 7> npy_dtypes{{
    {"<f4", 4, DType::float32},
    {"<i4", 4, DType::int32},
    {"|b1", 1, DType::boolean},
    {"|u1", 1, DType::uint8},
    {"|i1", 1, DType::int8},
    {"<f8", 8, DType::float32},
    {"<i8", 8, DType::int32},
}};

struct npy_header {
  npy_dtype dtype;
  Shape shape;
};

/// Recursive-descent parser for the Python dict literal of a .npy header, e.g.
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`. Accepts exactly the keys
/// descr, fortran_order and shape, each once, in any order; never reads past `text`.
class npy_header_parser {
 public:
  npy_header_parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  npy_header parse() {
    std::optional<std::string_view> descr;
    std::optional<bool> fortran_order;
    std::optional<Shape> shape;

    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string_view key = parse_string();
      expect(':');
      if (key == "descr") {
        set_once(descr, parse_descr(), key);
      } else if (key == "fortran_order") {
        set_once(fortran_order, parse_bool(), key);
      } else if (key == "shape") {
        set_once(shape, parse_shape(), key);
      } else {
        fail("unexpected header key '" + std::string(key) + "'");
      }
      skip_space();
      if (peek() != ',') break;
      ++pos_;
    }
    expect('}');
    skip_space();
    if (pos_ != text_.size()) fail("unparsable header: unexpected text after the dict at " + here());

    if (!descr) fail("header lacks the key 'descr'");
    if (!fortran_order) fail("header lacks the key 'fortran_order'");
    if (!shape) fail("header lacks the key 'shape'");
    if (*fortran_order) fail("Fortran-ordered arrays are not supported (save a C-contiguous array)");
    return {lookup_dtype(*descr), *shape};
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw format_error("npy " + std::string(source_) + ": " + what);
  }

  /// Where the parser stands, for messages: "offset 12" or "the end of the header".
  [[nodiscard]] std::string here() const {
    return pos_ == text_.size() ? "the end of the header" : "offset " + std::to_string(pos_);
  }

  [[nodiscard]] char peek() const noexcept { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  void skip_space() noexcept {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r'))
      ++pos_;
  }

  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("unparsable header: expected '") + c + "' at " + here());
    ++pos_;
  }

  template <class T, class V>
  void set_once(std::optional<T>& slot, V&& value, std::string_view key) {
    if (slot) fail("header repeats the key '" + std::string(key) + "'");
    slot = std::forward<V>(value);
  }

  /// A quoted Python string without escapes (no key or descr numpy writes needs them).
  std::string_view parse_string() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("unparsable header: expected a quoted string at " + here());
    const std::size_t begin = ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') fail("unparsable header: escape sequence in a string at " + here());
      ++pos_;
    }
    if (pos_ == text_.size()) fail("unparsable header: unterminated string");
    return text_.substr(begin, pos_++ - begin);
  }

  std::string_view parse_descr() {
    skip_space();
    if (peek() != '\'' && peek() != '"')
      fail("unsupported dtype: 'descr' is not a string (structured dtypes are not supported)");
    return parse_string();
  }

  bool parse_bool() {
    skip_space();
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("unparsable header: expected True or False at " + here());
  }

  /// A Python tuple of non-negative ints: `()`, `(5,)`, `(2, 3)`.
  Shape parse_shape() {
    expect('(');
    std::vector<std::int64_t> extents;
    bool trailing_comma = false;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      extents.push_back(parse_extent());
      skip_space();
      trailing_comma = peek() == ',';
      if (!trailing_comma) break;
      ++pos_;
    }
    expect(')');
    if (extents.size() == 1 && !trailing_comma) fail("unparsable header: the shape '(n)' is not a tuple (write '(n,)')");
    if (extents.size() > Shape::max_rank)
      fail("rank " + std::to_string(extents.size()) + " exceeds the maximum of " + std::to_string(Shape::max_rank));
    return Shape(extents.begin(), extents.end());
  }

  std::int64_t parse_extent() {
    if (peek() == '-') fail("negative extent in the shape at " + here());
    if (peek() < '0' || peek() > '9') fail("unparsable header: expected an integer extent at " + here());
    std::int64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      const int digit = peek() - '0';
      if (value > (std::numeric_limits<std::int64_t>::max() - digit) / 10)
        fail("extent too large at " + here());
      value = value * 10 + digit;
      ++pos_;
    }
    return value;
  }

  [[nodiscard]] npy_dtype lookup_dtype(std::string_view descr) const {
    for (const npy_dtype& d : npy_dtypes)
      if (d.descr == descr) return d;
    if (!descr.empty() && descr.front() == '>')
      fail("big-endian data ('" + std::string(descr) + "') is not supported (save it as little-endian)");
    fail("unsupported dtype '" + std::string(descr) + "' (supported: '<f4', '<i4', '<f8', '<i8')");
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t pos_ = 0;
};

/// Little-endian unsigned integer of `n` bytes at `p`.
[[nodiscard]] inline std::size_t read_le(const std::byte* p, std::size_t n) noexcept {
  std::size_t v = 0;
  for (std::size_t i = n; i-- > 0;) v = (v << 8) | std::to_integer<std::size_t>(p[i]);
  return v;
}

/// The shortest text that reads back as `x` ("1e+300"), where std::to_string prints every digit.
[[nodiscard]] inline std::string shortest_repr(double x) {
  std::array<char, 32> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), x);
  return std::string(buf.data(), r.ptr);
}

/// Reads `count` numpy bools (one byte each, 0 or 1) at `src` into `dst`; format_error for another byte.
inline void read_bools(const std::byte* src, std::size_t count, bool* dst, std::string_view source) {
  for (std::size_t i = 0; i < count; ++i) {
    const auto v = std::to_integer<unsigned>(src[i]);
    if (v > 1)
      throw format_error("npy " + std::string(source) + ": bool byte " + std::to_string(v) + " at flat index " +
                         std::to_string(i) + " is neither 0 nor 1");
    dst[i] = v == 1;
  }
}

/// Converts `count` elements of `Wide` at `src` (any alignment) into `Narrow` at `dst`.
template <class Narrow, class Wide>
void narrow_elements(const std::byte* src, std::size_t count, Narrow* dst, std::string_view source) {
  for (std::size_t i = 0; i < count; ++i) {
    Wide w;
    std::memcpy(&w, src + i * sizeof(Wide), sizeof(Wide));
    if constexpr (std::is_integral_v<Wide>) {
      if (w < std::numeric_limits<Narrow>::min() || w > std::numeric_limits<Narrow>::max())
        throw format_error("npy " + std::string(source) + ": int64 value " + std::to_string(w) + " at flat index " +
                           std::to_string(i) + " does not fit in int32");
    } else {
      // Finite values beyond float's range would become inf (the cast is undefined behaviour, even).
      if (std::isfinite(w) && std::fabs(w) > static_cast<Wide>(std::numeric_limits<Narrow>::max()))
        throw format_error("npy " + std::string(source) + ": float64 value " + shortest_repr(w) +
                           " at flat index " + std::to_string(i) + " is outside the float32 range");
    }
    dst[i] = static_cast<Narrow>(w);
  }
}

/// Python's repr of a shape tuple: "()", "(5,)", "(2, 3)".
[[nodiscard]] inline std::string python_tuple(const Shape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.rank(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + (shape.rank() == 1 ? ",)" : ")");
}

}  // namespace detail

/// Decodes a whole .npy file held in memory; `source` names it in error messages.
[[nodiscard]] inline Tensor parse_npy(std::span<const std::byte> bytes, std::string_view source = "<memory>") {
  const auto fail = [&](const std::string& what) -> format_error {
    return format_error("npy " + std::string(source) + ": " + what);
  };
  constexpr std::size_t magic_size = detail::npy_magic.size();
  if (bytes.size() < magic_size ||
      std::memcmp(bytes.data(), detail::npy_magic.data(), magic_size) != 0)
    throw fail("not a .npy file (bad magic string)");
  if (bytes.size() < magic_size + 2) throw fail("truncated header (no format version)");

  const auto major = std::to_integer<unsigned>(bytes[magic_size]);
  const auto minor = std::to_integer<unsigned>(bytes[magic_size + 1]);
  if (major < 1 || major > 3 || minor != 0)
    throw fail("unsupported format version " + std::to_string(major) + "." + std::to_string(minor));
  // Version 1.0 stores the header length in 2 bytes; 2.0 and 3.0 (UTF-8 header) in 4.
  const std::size_t length_size = major == 1 ? 2 : 4;
  const std::size_t preamble = magic_size + 2 + length_size;
  if (bytes.size() < preamble) throw fail("truncated header (no header length)");
  const std::size_t header_size = detail::read_le(bytes.data() + magic_size + 2, length_size);
  if (header_size > bytes.size() - preamble)
    throw fail("truncated header (declares " + std::to_string(header_size) + " bytes, " +
               std::to_string(bytes.size() - preamble) + " present)");

  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + preamble), header_size);
  const detail::npy_header header = detail::npy_header_parser(text, source).parse();

  std::size_t count = 1;
  for (std::int64_t extent : header.shape) {
    const auto e = static_cast<std::size_t>(extent);
    if (e != 0 && count > std::numeric_limits<std::size_t>::max() / header.dtype.itemsize / e)
      throw fail("shape " + header.shape.to_string() + " is too large");
    count *= e;
  }
  const std::size_t data_size = bytes.size() - preamble - header_size;
  if (data_size != count * header.dtype.itemsize)
    throw fail("data size mismatch: shape " + header.shape.to_string() + " of '" + std::string(header.dtype.descr) +
               "' needs " + std::to_string(count * header.dtype.itemsize) + " bytes, the file holds " +
               std::to_string(data_size));

  const std::byte* data = bytes.data() + preamble + header_size;
  Tensor t = Tensor::empty(header.shape, header.dtype.stored);
  if (header.dtype.descr == "<f8")
    detail::narrow_elements<float, double>(data, count, t.data<float>(), source);
  else if (header.dtype.descr == "<i8")
    detail::narrow_elements<std::int32_t, std::int64_t>(data, count, t.data<std::int32_t>(), source);
  else if (header.dtype.stored == DType::boolean)
    detail::read_bools(data, count, t.data<bool>(), source);
  else if (count != 0)
    visit_dtype(header.dtype.stored, [&]<class T>(T) { std::memcpy(t.data<T>(), data, data_size); });
  return t;
}

/// The bytes numpy.save writes for `t` (format version 1.0).
[[nodiscard]] inline std::string to_npy_bytes(const Tensor& t) {
  if (!t.defined()) throw value_error("to_npy_bytes: the tensor is undefined (default-constructed)");
  const auto entry = std::find_if(detail::npy_dtypes.begin(), detail::npy_dtypes.end(),
                                  [&](const detail::npy_dtype& d) { return d.stored == t.dtype(); });
  const std::string_view descr = entry->descr;  // the first entry of a dtype is the one it is written as
  std::string dict = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " +
                     detail::python_tuple(t.shape()) + ", }";
  if (t.ndim() > 0) dict.append(detail::npy_growth_digits - std::to_string(t.shape()[0]).size(), ' ');

  // numpy pads with spaces and a final newline so that the data starts on a 64-byte boundary,
  // adding a full 64 bytes when the dict already ends on one. At rank <= 8 the header stays far
  // below format 1.0's limit of 65535 bytes.
  const std::size_t preamble = detail::npy_magic.size() + 2 + 2;
  const std::size_t unpadded = preamble + dict.size() + 1;
  dict.append(detail::npy_alignment - unpadded % detail::npy_alignment, ' ');
  dict += '\n';

  std::string out;
  out.reserve(preamble + dict.size() + t.nbytes());
  out += detail::npy_magic;
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  visit_dtype(t.dtype(), [&]<class T>(T) { out.append(reinterpret_cast<const char*>(t.data<T>()), t.nbytes()); });
  return out;
}

/// Reads a .npy file into a new tensor.
[[nodiscard]] inline Tensor load_npy(const std::filesystem::path& path) {
  const std::string source = "'" + path.string() + "'";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw format_error("npy " + source + (std::filesystem::exists(path, ec) ? ": not a regular file" : ": file not found"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw format_error("npy " + source + ": cannot open the file for reading");
  const std::vector<char> contents{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw format_error("npy " + source + ": read error");
  return parse_npy(std::as_bytes(std::span(contents)), source);
}

/// Writes `t` as a .npy file (format 1.0), replacing any existing file atomically: a failed write
/// leaves the old file as it was (io/atomic_file.hpp).
inline void save_npy(const std::filesystem::path& path, const Tensor& t) {
  const std::string bytes = to_npy_bytes(t);
  write_file_atomically(path, "npy '" + path.string() + "'", [&](AtomicFile& f) { f.write(bytes.data(), bytes.size()); });
}

}  // namespace tracemod::io
