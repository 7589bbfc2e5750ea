// Python's repr of floating-point numbers, as graphs print const values: the shortest decimal that
// round-trips in the number's own type (0.1f prints `0.1`), positional for decimal exponents in
// [-4, 16) and scientific otherwise (`1e-05`, `1e+16`).
#pragma once

#include <charconv>
#include <string>

namespace tracemod {

namespace detail {

template <class T>
inline std::string repr_floating(T v) {
  // Python's float repr: the shortest digits that round-trip in T, written positionally when the decimal
  // exponent is in [-4, 16) (0.0001, 1.0, 0.9) and in scientific form otherwise (1e-05, 1e+16).
  char buf[40];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string s(buf, res.ptr);
  if (s == "inf" || s == "-inf") return s;
  if (s.find("nan") != std::string::npos) return "nan";
  const auto e = s.find('e');
  const bool negative = s[0] == '-';
  std::string digits;
  for (char c : s.substr(0, e))
    if (c >= '0' && c <= '9') digits += c;
  const int exp10 = std::stoi(s.substr(e + 1));
  // Built by appending: g++ 12 misreports -Wrestrict on `"literal" + std::string&&`.
  std::string out = negative ? "-" : "";
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 < 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-exp10 - 1), '0');
      out += digits;
    } else {
      const auto int_len = static_cast<std::size_t>(exp10) + 1;
      if (digits.size() <= int_len) {
        out += digits;
        out.append(int_len - digits.size(), '0');
        out += ".0";
      } else {
        out.append(digits, 0, int_len);
        out += '.';
        out.append(digits, int_len);
      }
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1);
  }
  const int mag = exp10 < 0 ? -exp10 : exp10;
  out += exp10 < 0 ? "e-" : "e+";
  if (mag < 10) out += '0';
  out += std::to_string(mag);
  return out;
}

}  // namespace detail

/// Python's repr of a double (`1.0`, `0.1`, `1e-05`).
inline std::string repr_real(double v) { return detail::repr_floating(v); }
/// The shortest decimal that reads back as the same float (0.1f is `0.1`).
inline std::string repr_real(float v) { return detail::repr_floating(v); }

}  // namespace tracemod
