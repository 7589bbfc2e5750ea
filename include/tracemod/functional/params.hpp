// Value types of the non-tensor arguments of functional ops, and their printed form
// (Python's repr, as MegEngine prints const values in a graph: (1, 1), True, None, 1e-05).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/none.hpp>
#include <tracemod/core/shape.hpp>

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace tracemod::functional {

/// A (height, width) pair; an integer means the same value for both, as in PyTorch.
struct pair2 {
  std::int64_t h = 0, w = 0;
  constexpr pair2() = default;
  constexpr pair2(std::int64_t v) : h(v), w(v) {}  // NOLINT: implicit by design (stride=2)
  constexpr pair2(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
  friend constexpr bool operator==(const pair2&, const pair2&) = default;
};

/// A short list of integers that may be negative (reshape targets with -1, permutations).
class int_list {
 public:
  static constexpr std::size_t max_size = Shape::max_rank;
  constexpr int_list() = default;
  constexpr int_list(std::initializer_list<std::int64_t> v) {
    if (v.size() > max_size) throw value_error("int_list: more than " + std::to_string(max_size) + " values");
    for (std::int64_t x : v) values_[size_++] = x;
  }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  [[nodiscard]] constexpr std::int64_t operator[](std::size_t i) const noexcept { return values_[i]; }
  [[nodiscard]] constexpr const std::int64_t* begin() const noexcept { return values_.data(); }
  [[nodiscard]] constexpr const std::int64_t* end() const noexcept { return values_.data() + size_; }
  friend constexpr bool operator==(const int_list& a, const int_list& b) noexcept {
    if (a.size_ != b.size_) return false;
    for (std::size_t i = 0; i < a.size_; ++i)
      if (a.values_[i] != b.values_[i]) return false;
    return true;
  }

 private:
  std::array<std::int64_t, max_size> values_{};
  std::size_t size_ = 0;
};

namespace detail {

inline std::string repr_double(double v) {
  // Python's float repr: the shortest round-trip digits, written positionally when the decimal
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

/// Python repr of a const argument value.
inline std::string repr(std::int64_t v) { return std::to_string(v); }
inline std::string repr(int v) { return std::to_string(v); }
inline std::string repr(double v) { return detail::repr_double(v); }
inline std::string repr(float v) { return detail::repr_double(static_cast<double>(v)); }
inline std::string repr(bool v) { return v ? "True" : "False"; }
inline std::string repr(none_t) { return "None"; }
inline std::string repr(std::string_view v) { return std::string(v); }
inline std::string repr(const pair2& v) {
  std::string s = "(";
  s += repr(v.h);
  s += ", ";
  s += repr(v.w);
  s += ")";
  return s;
}
inline std::string repr(const int_list& v) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += repr(v[i]);
  }
  s += v.size() == 1 ? ",)" : ")";
  return s;
}
template <class T>
std::string repr(const std::optional<T>& v) {
  return v ? repr(*v) : repr(none);
}

}  // namespace tracemod::functional
