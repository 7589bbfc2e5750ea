// Shape: a small, fixed-capacity list of extents (no heap, usable in constant expressions).
#pragma once

#include <tracemod/core/checked.hpp>
#include <tracemod/core/error.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace tracemod {

class Shape {
 public:
  using value_type = std::int64_t;
  static constexpr std::size_t max_rank = 8;

  constexpr Shape() = default;
  constexpr Shape(std::initializer_list<value_type> dims) {
    for (value_type d : dims) push_back(d);
  }
  template <class It>
  constexpr Shape(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<value_type>(*first));
  }

  constexpr void push_back(value_type d) {
    if (rank_ == max_rank)
      throw shape_error("Shape: rank exceeds the maximum of " + std::to_string(max_rank));
    if (d < 0) throw shape_error("Shape: negative extent " + std::to_string(d));
    dims_[rank_++] = d;
  }

  [[nodiscard]] constexpr std::size_t rank() const noexcept { return rank_; }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return rank_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return rank_ == 0; }
  [[nodiscard]] constexpr value_type operator[](std::size_t i) const noexcept { return dims_[i]; }
  [[nodiscard]] constexpr value_type& operator[](std::size_t i) noexcept { return dims_[i]; }
  [[nodiscard]] constexpr const value_type* begin() const noexcept { return dims_.data(); }
  [[nodiscard]] constexpr const value_type* end() const noexcept { return dims_.data() + rank_; }
  [[nodiscard]] constexpr value_type* begin() noexcept { return dims_.data(); }
  [[nodiscard]] constexpr value_type* end() noexcept { return dims_.data() + rank_; }
  [[nodiscard]] constexpr value_type back() const noexcept { return dims_[rank_ - 1]; }

  /// Number of elements (1 for a rank-0 shape); a count beyond int64 is a shape_error naming `op`.
  [[nodiscard]] constexpr value_type numel(std::string_view op = "Shape") const {
    value_type n = 1;
    bool overflow = false;
    for (std::size_t i = 0; i < rank_; ++i) {
      if (dims_[i] == 0) return 0;  // even when the other extents overflow together
      overflow = __builtin_mul_overflow(n, dims_[i], &n) || overflow;
    }
    if (overflow)
      throw shape_error(std::string(op) + ": the element count of shape " + to_string() + " overflows int64");
    return n;
  }

  friend constexpr bool operator==(const Shape& a, const Shape& b) noexcept {
    return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
  }

  /// "(2, 3, 4)"; a rank-1 shape prints as "(5,)" like a Python tuple.
  [[nodiscard]] std::string to_string() const {
    std::string s = "(";
    for (std::size_t i = 0; i < rank_; ++i) {
      if (i) s += ", ";
      s += std::to_string(dims_[i]);
    }
    if (rank_ == 1) s += ",";
    return s + ")";
  }

 private:
  std::array<value_type, max_rank> dims_{};
  std::size_t rank_ = 0;
};

using Strides = std::array<std::int64_t, Shape::max_rank>;

/// Row-major element strides of a contiguous tensor of shape `s`.
[[nodiscard]] constexpr Strides contiguous_strides(const Shape& s) noexcept {
  Strides st{};
  std::int64_t acc = 1;
  for (std::size_t i = s.rank(); i-- > 0;) {
    st[i] = acc;
    // Wraps instead of overflowing (UB) on shapes whose numel() throws; unused for valid ones.
    (void)__builtin_mul_overflow(acc, s[i], &acc);
  }
  return st;
}

/// Whether numpy broadcasting accepts the two shapes (trailing extents equal or 1).
[[nodiscard]] constexpr bool broadcastable(const Shape& a, const Shape& b) noexcept {
  for (std::size_t i = 1; i <= a.rank() && i <= b.rank(); ++i) {
    const std::int64_t da = a[a.rank() - i], db = b[b.rank() - i];
    if (da != db && da != 1 && db != 1) return false;
  }
  return true;
}

/// Numpy broadcasting of two shapes; `op` names the caller in the error message.
[[nodiscard]] constexpr Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  const std::size_t r = std::max(a.rank(), b.rank());
  Shape out;
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t ia = i + a.rank(), ib = i + b.rank();  // right-aligned, offset by r
    const std::int64_t da = ia >= r ? a[ia - r] : 1;
    const std::int64_t db = ib >= r ? b[ib - r] : 1;
    if (da != db && da != 1 && db != 1)
      throw shape_error(std::string(op) + ": shapes " + a.to_string() + " and " + b.to_string() +
                        " cannot be broadcast together");
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

/// Maps a possibly negative axis into [0, rank); throws value_error naming `op` otherwise.
[[nodiscard]] constexpr std::size_t normalize_axis(std::int64_t axis, std::size_t rank, std::string_view op) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r)
    throw value_error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

}  // namespace tracemod
