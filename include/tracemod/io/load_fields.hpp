// The typed reading of tmod::load's JSON description: each accessor checks the kind and range of
// what it reads and throws format_error naming where in the file it was (`where_`).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/qparams.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/io/format.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tracemod::io::detail {

class json_fields {
 protected:
  std::string where_ = "header";  ///< what is being read, for messages ("module 3 'layer1', graph ...")
  std::vector<Tensor> tensors_;   ///< the file's tensors, which values name by index

  [[noreturn]] void fail(const std::string& why) const { throw format_error("load: " + where_ + ": " + why); }

  // ---- typed access to the JSON --------------------------------------------------------------------
  const json& field(const json& j, const char* key) const {
    if (!j.is_object()) fail("expected an object holding '" + std::string(key) + "'");
    const auto it = j.find(key);
    if (it == j.end()) fail("missing field '" + std::string(key) + "'");
    return *it;
  }
  const json& array(const json& j, const char* key) const {
    const json& a = field(j, key);
    if (!a.is_array()) fail("field '" + std::string(key) + "' must be an array");
    return a;
  }
  std::string string(const json& j, const char* key) const {
    const json& s = field(j, key);
    if (!s.is_string()) fail("field '" + std::string(key) + "' must be a string");
    return s.get<std::string>();
  }
  std::int64_t integer(const json& j) const {
    if (j.is_number_integer() && !(j.is_number_unsigned() && j.get<std::uint64_t>() > std::uint64_t(INT64_MAX)))
      return j.get<std::int64_t>();
    fail("expected an integer, got " + j.dump());
  }
  std::int64_t integer(const json& j, const char* key) const { return integer(field(j, key)); }
  std::size_t index(const json& j, const char* key, std::size_t size, const char* what) const {
    const std::int64_t i = integer(j, key);
    if (i < 0 || static_cast<std::uint64_t>(i) >= size)
      fail(std::string(what) + " index " + std::to_string(i) + " is out of range (" + std::to_string(size) + ")");
    return static_cast<std::size_t>(i);
  }
  bool boolean(const json& j, const char* key) const {
    const json& b = field(j, key);
    if (!b.is_boolean()) fail("field '" + std::string(key) + "' must be a bool");
    return b.get<bool>();
  }
  DType dtype(const json& j) const {
    const std::string d = string(j, "dtype");
    for (DType t : all_dtypes)
      if (d == dtype_name(t)) return t;
    fail("unknown dtype '" + d + "'");
  }
  /// A shape whose byte size fits: extents are checked before Shape computes their product.
  Shape shape(const json& j, DType dt) const {
    const json& a = array(j, "shape");
    if (a.size() > Shape::max_rank) fail("rank " + std::to_string(a.size()) + " exceeds " + std::to_string(Shape::max_rank));
    Shape s;
    std::uint64_t bytes = itemsize(dt);
    for (const json& d : a) {
      const std::int64_t x = integer(d);
      if (x < 0) fail("negative extent " + std::to_string(x));
      if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(x), &bytes) ||
          bytes > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail("shape " + a.dump() + " overflows");
      s.push_back(x);
    }
    return s;
  }
  std::optional<QParams> qparams(const json& j) const {
    const auto it = j.find("qparams");
    if (it == j.end() || it->is_null()) return std::nullopt;
    QParams q;
    q.dtype_meta = string(*it, "dtype_meta");
    const json& scale = field(*it, "scale");
    if (!scale.is_number()) fail("qparams scale must be a number");
    q.scale = scale.get<float>();
    const std::int64_t zp = integer(*it, "zero_point");
    if (zp < INT32_MIN || zp > INT32_MAX) fail("qparams zero_point out of range");
    q.zero_point = static_cast<std::int32_t>(zp);
    return q;
  }

  Value value(const json& j, int depth = 0) const {
    if (depth > max_nesting) fail("values nest deeper than " + std::to_string(max_nesting));
    if (j.is_null()) return none;
    if (j.is_boolean()) return j.get<bool>();
    if (j.is_number_integer()) return integer(j);
    if (j.is_string()) return j.get<std::string>();
    if (!j.is_object() || j.size() != 1) fail("malformed value " + j.dump());
    const std::string& key = j.begin().key();
    const json& v = j.begin().value();
    if (key == "f32" || key == "f64") {
      double x;
      if (v.is_number()) x = v.get<double>();
      else if (v == "nan") x = std::nan("");
      else if (v == "inf") x = HUGE_VAL;
      else if (v == "-inf") x = -HUGE_VAL;
      else fail("malformed number " + v.dump());
      return Value(Real{x, key == "f32"});
    }
    if (key == "tensor") return tensors_.at(index(j, "tensor", tensors_.size(), "tensor"));
    if (key == "tuple" || key == "list") {
      if (!v.is_array()) fail("malformed " + key);
      ValueList items;
      for (const json& x : v) items.push_back(value(x, depth + 1));
      return key == "tuple" ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    if (key == "dict") {
      if (!v.is_array()) fail("malformed dict");
      ValueDict items;
      for (const json& kv : v) {
        if (!kv.is_array() || kv.size() != 2 || !kv[0].is_string()) fail("malformed dict item " + kv.dump());
        items.emplace_back(kv[0].get<std::string>(), value(kv[1], depth + 1));
      }
      return Value::dict(std::move(items));
    }
    fail("unknown value kind '" + key + "'");
  }
};

}  // namespace tracemod::io::detail
