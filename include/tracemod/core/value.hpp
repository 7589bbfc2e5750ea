// Value: a type-erased, possibly nested value (MegEngine's pytree leaves and containers):
// none, Tensor, integer, floating-point number, bool, string, list, tuple and string-keyed dict.
// It carries the non-tensor arguments of recorded calls, the params of type-erased op calls, and
// what a TracedModule call returns for nested outputs.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/none.hpp>
#include <tracemod/core/repr.hpp>
#include <tracemod/core/tensor.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace tracemod {

class Value;

/// A number that remembers whether it was a C++ float or double, so it prints as written
/// (0.1f prints `0.1`, not the double nearest to the float).
struct Real {
  double value = 0.0;
  bool single = false;  ///< came from a float
  friend bool operator==(const Real& a, const Real& b) noexcept { return a.value == b.value; }
};

using ValueList = std::vector<Value>;
using ValueDict = std::vector<std::pair<std::string, Value>>;  // insertion order, unique keys

class Value {
 public:
  enum class Kind : std::uint8_t { none, tensor, integer, real, boolean, string, list, tuple, dict };

  Value() = default;
  Value(none_t) {}                                                  // NOLINT: implicit by design
  Value(Tensor t) : v_(std::move(t)) {}                             // NOLINT
  Value(bool b) : v_(b) {}                                          // NOLINT
  Value(std::string s) : v_(std::move(s)) {}                        // NOLINT
  Value(const char* s) : v_(std::string(s)) {}                      // NOLINT
  Value(std::string_view s) : v_(std::string(s)) {}                 // NOLINT
  Value(Real r) : v_(r) {}                                          // NOLINT
  Value(float f) : v_(Real{static_cast<double>(f), true}) {}        // NOLINT
  Value(double d) : v_(Real{d, false}) {}                           // NOLINT
  template <class I>
    requires(std::is_integral_v<I> && !std::is_same_v<I, bool>)
  Value(I i) : v_(static_cast<std::int64_t>(i)) {}  // NOLINT

  [[nodiscard]] static Value list(ValueList items) { return Value(Seq{std::move(items), false}); }
  [[nodiscard]] static Value tuple(ValueList items) { return Value(Seq{std::move(items), true}); }
  [[nodiscard]] static Value dict(ValueDict items) {
    for (std::size_t i = 0; i < items.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (items[i].first == items[j].first) throw value_error("Value::dict: duplicate key '" + items[i].first + "'");
    return Value(std::move(items));
  }

  [[nodiscard]] Kind kind() const noexcept {
    switch (v_.index()) {
      case 0: return Kind::none;
      case 1: return Kind::tensor;
      case 2: return Kind::integer;
      case 3: return Kind::real;
      case 4: return Kind::boolean;
      case 5: return Kind::string;
      case 6: return std::get<Seq>(v_).is_tuple ? Kind::tuple : Kind::list;
      default: return Kind::dict;
    }
  }
  [[nodiscard]] bool is_none() const noexcept { return kind() == Kind::none; }
  [[nodiscard]] bool is_tensor() const noexcept { return kind() == Kind::tensor; }
  [[nodiscard]] bool is_number() const noexcept { return kind() == Kind::integer || kind() == Kind::real; }
  [[nodiscard]] bool is_sequence() const noexcept { return v_.index() == 6; }

  [[nodiscard]] const Tensor& tensor() const { return get<Tensor>("a tensor"); }
  [[nodiscard]] std::int64_t integer() const { return get<std::int64_t>("an integer"); }
  [[nodiscard]] bool boolean() const { return get<bool>("a bool"); }
  [[nodiscard]] const std::string& string() const { return get<std::string>("a string"); }
  [[nodiscard]] const Real& real() const { return get<Real>("a floating-point number"); }
  /// An integer or a real number as double.
  [[nodiscard]] double number() const {
    if (kind() == Kind::integer) return static_cast<double>(integer());
    return get<Real>("a number").value;
  }
  /// The items of a list or a tuple.
  [[nodiscard]] const ValueList& items() const { return get<Seq>("a list or tuple").items; }
  [[nodiscard]] const ValueDict& dict_items() const { return get<ValueDict>("a dict"); }
  /// The entry of a dict by key; throws value_error naming the key.
  [[nodiscard]] const Value& at(std::string_view key) const {
    for (const auto& [k, v] : dict_items())
      if (k == key) return v;
    throw value_error("Value: no key '" + std::string(key) + "' in " + repr());
  }
  /// Element i of a list or tuple.
  [[nodiscard]] const Value& operator[](std::size_t i) const {
    const ValueList& v = items();
    if (i >= v.size())
      throw value_error("Value: index " + std::to_string(i) + " out of range for " + std::to_string(v.size()) + " items");
    return v[i];
  }
  [[nodiscard]] std::size_t size() const {
    if (kind() == Kind::dict) return dict_items().size();
    return items().size();
  }

  /// A single-tensor value converts to the tensor (graph outputs are usually one tensor).
  operator Tensor() const { return tensor(); }  // NOLINT: implicit by design

  /// Python's repr: `None`, `True`, `2`, `2.5`, `(1, 2)`, `[1, 2]`, `{'a': 1}`, `Tensor(shape=(1, 3))`.
  [[nodiscard]] std::string repr() const;

  friend bool operator==(const Value& a, const Value& b);

 private:
  struct Seq {
    ValueList items;
    bool is_tuple = false;
  };
  explicit Value(Seq s) : v_(std::move(s)) {}
  explicit Value(ValueDict d) : v_(std::move(d)) {}

  template <class T>
  const T& get(const char* what) const {
    if (const T* p = std::get_if<T>(&v_)) return *p;
    throw value_error("Value: expected " + std::string(what) + ", got " + kind_name(kind()));
  }
  static std::string kind_name(Kind k) {
    constexpr const char* names[] = {"None", "a tensor", "an integer", "a floating-point number", "a bool",
                                     "a string", "a list", "a tuple", "a dict"};
    return names[static_cast<int>(k)];
  }

  std::variant<none_t, Tensor, std::int64_t, Real, bool, std::string, Seq, ValueDict> v_;
};

inline std::string Value::repr() const {
  switch (kind()) {
    case Kind::none: return "None";
    case Kind::tensor: {
      const Tensor& t = tensor();
      return t.defined() ? "Tensor(shape=" + t.shape().to_string() + ", dtype=" + std::string(dtype_name(t.dtype())) + ")"
                         : "Tensor(undefined)";
    }
    case Kind::integer: return std::to_string(integer());
    case Kind::real: return real().single ? repr_real(static_cast<float>(real().value)) : repr_real(real().value);
    case Kind::boolean: return boolean() ? "True" : "False";
    case Kind::string: return string();
    case Kind::list:
    case Kind::tuple: {
      const bool tup = kind() == Kind::tuple;
      std::string s = tup ? "(" : "[";
      for (std::size_t i = 0; i < items().size(); ++i) {
        if (i) s += ", ";
        s += items()[i].repr();
      }
      if (tup && items().size() == 1) s += ",";
      return s + (tup ? ")" : "]");
    }
    case Kind::dict: {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, v] : dict_items()) {
        if (!first) s += ", ";
        first = false;
        s += "'" + k + "': " + v.repr();
      }
      return s + "}";
    }
  }
  return {};
}

inline bool operator==(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::none: return true;
    case Value::Kind::tensor: return a.tensor().shares_storage_with(b.tensor()) && a.tensor().shape() == b.tensor().shape();
    case Value::Kind::integer: return a.integer() == b.integer();
    case Value::Kind::real: return a.real() == b.real();
    case Value::Kind::boolean: return a.boolean() == b.boolean();
    case Value::Kind::string: return a.string() == b.string();
    case Value::Kind::list:
    case Value::Kind::tuple: return a.items() == b.items();
    case Value::Kind::dict: return a.dict_items() == b.dict_items();
  }
  return false;
}

}  // namespace tracemod
