// Text helpers of the profiling tables: padded columns, digit grouping, fixed-point numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tracemod::profile_detail {

/// `s` padded with spaces to `width` (on the left when `right`); longer text is kept whole.
inline std::string pad(const std::string& s, std::size_t width, bool right = false) {
  if (s.size() >= width) return right ? " " + s : s + " ";
  const std::string fill(width - s.size(), ' ');
  return right ? fill + s : s + fill;
}

/// 11689512 -> "11,689,512".
inline std::string grouped(std::int64_t v) {
  const bool negative = v < 0;
  std::string digits = std::to_string(negative ? -v : v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return negative ? "-" + out : out;
}

/// `v` with `decimals` digits after the point.
inline std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace tracemod::profile_detail
