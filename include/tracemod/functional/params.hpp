// Value types of the non-tensor arguments of functional ops, and their printed form
// (Python's repr, as MegEngine prints const values in a graph: (1, 1), True, None, 1e-05).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/none.hpp>
#include <tracemod/core/repr.hpp>
#include <tracemod/core/shape.hpp>

#include <array>
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
    for (std::int64_t x : v) push_back(x);
  }
  /// Appends a value; throws value_error past max_size.
  constexpr void push_back(std::int64_t x) {
    if (size_ == max_size) throw value_error("int_list: more than " + std::to_string(max_size) + " values");
    values_[size_++] = x;
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


/// Python repr of a const argument value.
inline std::string repr(std::int64_t v) { return std::to_string(v); }
inline std::string repr(int v) { return std::to_string(v); }
inline std::string repr(double v) { return repr_real(v); }
inline std::string repr(float v) { return repr_real(v); }
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
