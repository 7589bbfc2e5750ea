// A small tensor the ONNX import computes with at import time (fold.hpp): integers (INT64, INT32,
// BOOL and the narrower integer types) or reals (FLOAT, DOUBLE), row-major, with its ONNX element
// type. Converted from and to TensorProto; every result is at most folded_limit elements. Beside
// it, what the fold rules share: the node being folded, numpy broadcasting, elementwise evaluation.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/onnx/proto.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace tracemod::onnx::detail {

/// The largest value import computes: shape arithmetic and masks are far smaller; a larger result
/// (a ConstantOfShape of an image) is left to be refused rather than allocated.
inline constexpr std::int64_t folded_limit = std::int64_t{1} << 24;

struct host_tensor {
  std::int32_t type = proto::TensorProto::INT64;
  std::vector<std::int64_t> dims{};
  std::vector<std::int64_t> ints{};  ///< the elements of an integer or bool type
  std::vector<double> reals{};       ///< the elements of FLOAT (rounded to float) and DOUBLE

  [[nodiscard]] static bool is_real(std::int32_t t) noexcept {
    return t == proto::TensorProto::FLOAT || t == proto::TensorProto::DOUBLE;
  }
  [[nodiscard]] bool real() const noexcept { return is_real(type); }
  [[nodiscard]] std::size_t size() const noexcept { return real() ? reals.size() : ints.size(); }
  [[nodiscard]] std::size_t rank() const noexcept { return dims.size(); }
  [[nodiscard]] double real_at(std::size_t i) const { return real() ? reals[i] : static_cast<double>(ints[i]); }

  /// An empty tensor of `type` and `dims` (elements to be pushed).
  static host_tensor of(std::int32_t type, std::vector<std::int64_t> dims) {
    host_tensor h;
    h.type = type;
    h.dims = std::move(dims);
    return h;
  }
  /// Appends element i of `src` (of the same kind).
  void push_from(const host_tensor& src, std::size_t i) {
    if (real()) reals.push_back(src.reals[i]);
    else ints.push_back(src.ints[i]);
  }
};

/// "(2, 3)": how fold messages show dims.
inline std::string dims_repr(const std::vector<std::int64_t>& d) {
  std::string s = "(";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (d.size() == 1 ? ",)" : ")");
}

/// The element count of `dims`; value_error naming `what` (and the dims) for a negative extent or
/// more than folded_limit elements.
inline std::int64_t folded_count(const std::vector<std::int64_t>& dims, std::string_view what) {
  std::int64_t n = 1;
  for (std::int64_t d : dims) {
    if (d < 0) throw value_error(std::string(what) + " " + dims_repr(dims) + " has a negative extent");
    if (d != 0 && n > folded_limit / d)
      throw value_error(std::string(what) + " " + dims_repr(dims) + " holds more than " + std::to_string(folded_limit) +
                        " elements (import computes values of at most that size)");
    n *= d;
  }
  return n;
}

/// The elements of a checked TensorProto of integer type T (raw bytes or the typed field).
template <class T, class Field>
std::vector<std::int64_t> host_integers(const proto::TensorProto& t, const Field& field, std::size_t n) {
  const std::vector<T> v = elements<T>(t, field, n);
  return {v.begin(), v.end()};
}

/// A TensorProto as a host_tensor; value_error for element types import does not compute with.
inline host_tensor host_of(const proto::TensorProto& t, std::string_view where) {
  require_embedded(t, where);
  check_tensor(t, where);
  host_tensor h;
  h.type = t.data_type();
  h.dims.assign(t.dims().begin(), t.dims().end());
  const auto n = static_cast<std::size_t>(folded_count(h.dims, std::string(where) + ": tensor '" + t.name() + "' of dims"));
  using P = proto::TensorProto;
  switch (t.data_type()) {
    case P::FLOAT: {
      const std::vector<float> v = elements<float>(t, t.float_data(), n);
      h.reals.assign(v.begin(), v.end());
      break;
    }
    case P::DOUBLE: h.reals = elements<double>(t, t.double_data(), n); break;
    case P::INT64: h.ints = elements<std::int64_t>(t, t.int64_data(), n); break;
    case P::INT32: h.ints = host_integers<std::int32_t>(t, t.int32_data(), n); break;
    case P::INT16: h.ints = host_integers<std::int16_t>(t, t.int32_data(), n); break;
    case P::UINT16: h.ints = host_integers<std::uint16_t>(t, t.int32_data(), n); break;
    case P::INT8: h.ints = host_integers<std::int8_t>(t, t.int32_data(), n); break;
    case P::UINT8: h.ints = host_integers<std::uint8_t>(t, t.int32_data(), n); break;
    case P::BOOL:
      h.ints = host_integers<std::uint8_t>(t, t.int32_data(), n);
      for (std::int64_t& b : h.ints) b = b != 0;
      break;
    case P::UINT32: h.ints = host_integers<std::uint32_t>(t, t.uint64_data(), n); break;
    default:
      throw value_error(std::string(where) + ": tensor '" + t.name() + "' of element type " + elem_type_name(t.data_type()) +
                        " (import computes with integer, bool, FLOAT and DOUBLE values)");
  }
  return h;
}

/// A host_tensor as a TensorProto named `name`, in the typed field of its element type.
inline proto::TensorProto proto_of(const host_tensor& h, const std::string& name) {
  proto::TensorProto t;
  t.set_name(name);
  t.set_data_type(h.type);
  for (std::int64_t d : h.dims) t.add_dims(d);
  using P = proto::TensorProto;
  switch (h.type) {
    case P::FLOAT: for (double v : h.reals) t.add_float_data(static_cast<float>(v)); break;
    case P::DOUBLE: for (double v : h.reals) t.add_double_data(v); break;
    case P::INT64: for (std::int64_t v : h.ints) t.add_int64_data(v); break;
    case P::UINT32: for (std::int64_t v : h.ints) t.add_uint64_data(static_cast<std::uint64_t>(v)); break;
    default: for (std::int64_t v : h.ints) t.add_int32_data(static_cast<std::int32_t>(v)); break;
  }
  return t;
}

/// `v` as an element of integer type `type`: wrapped to its width as a C++ conversion would, bool
/// as v != 0.
inline std::int64_t narrow_integer(std::int64_t v, std::int32_t type) {
  using P = proto::TensorProto;
  switch (type) {
    case P::BOOL: return v != 0;
    case P::INT32: return static_cast<std::int32_t>(v);
    case P::INT16: return static_cast<std::int16_t>(v);
    case P::UINT16: return static_cast<std::uint16_t>(v);
    case P::INT8: return static_cast<std::int8_t>(v);
    case P::UINT8: return static_cast<std::uint8_t>(v);
    case P::UINT32: return static_cast<std::uint32_t>(v);
    default: return v;
  }
}

/// `h` converted to element type `to` (ONNX Cast): reals to integers truncate toward zero (NaN and
/// values out of int64's range are refused), integers to reals round to float for FLOAT.
inline host_tensor cast_host(const host_tensor& h, std::int32_t to, std::string_view where) {
  host_tensor out = host_tensor::of(to, h.dims);
  const bool float32 = to == proto::TensorProto::FLOAT;
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (out.real()) {
      const double v = h.real_at(i);
      out.reals.push_back(float32 ? static_cast<double>(static_cast<float>(v)) : v);
    } else if (h.real()) {
      const double v = std::trunc(h.reals[i]);
      if (to == proto::TensorProto::BOOL) {
        out.ints.push_back(h.reals[i] != 0);
        continue;
      }
      if (!(v >= -9.2233720368547758e18 && v < 9.2233720368547758e18))
        throw value_error(std::string(where) + ": " + std::to_string(h.reals[i]) + " has no " + elem_type_name(to) + " value");
      out.ints.push_back(narrow_integer(static_cast<std::int64_t>(v), to));
    } else {
      out.ints.push_back(narrow_integer(h.ints[i], to));
    }
  }
  return out;
}

/// One node being folded: its inputs as host tensors (absent optional inputs are left empty and
/// flagged), its attributes and the model's opset.
struct fold_node {
  const proto::NodeProto& node;
  std::vector<host_tensor> in;
  std::vector<bool> present;
  std::int64_t opset;

  [[nodiscard]] bool has(std::size_t i) const { return i < present.size() && present[i]; }
  [[nodiscard]] const host_tensor& input(std::size_t i) const {
    if (!has(i)) throw value_error("input " + std::to_string(i) + " is missing");
    return in[i];
  }
  [[nodiscard]] std::vector<std::int64_t> integers(std::size_t i) const {
    const host_tensor& h = input(i);
    if (h.real()) throw value_error("input " + std::to_string(i) + " is " + elem_type_name(h.type) + ", where ONNX defines INT64");
    return h.ints;
  }
  [[nodiscard]] std::int64_t scalar_integer(std::size_t i) const {
    const std::vector<std::int64_t> v = integers(i);
    if (v.size() != 1) throw value_error("input " + std::to_string(i) + " holds " + std::to_string(v.size()) + " values, not one");
    return v[0];
  }
};

/// Axis `a` of a rank-`rank` value, negative counting from the end; value_error out of range.
inline std::size_t fold_axis(std::int64_t a, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (a < -r || a >= r) throw value_error("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return static_cast<std::size_t>(a < 0 ? a + r : a);
}

/// The tensor of `src`'s elements at `index`, with `dims`.
inline host_tensor pick(const host_tensor& src, std::vector<std::int64_t> dims, const std::vector<std::size_t>& index) {
  host_tensor out = host_tensor::of(src.type, std::move(dims));
  for (std::size_t i : index) out.push_from(src, i);
  return out;
}

/// Numpy broadcasting of several dims; value_error naming them when they do not broadcast.
inline std::vector<std::int64_t> broadcast_dims(const std::vector<const std::vector<std::int64_t>*>& all) {
  std::size_t rank = 0;
  for (const auto* d : all) rank = std::max(rank, d->size());
  std::vector<std::int64_t> out(rank, 1);
  for (const auto* d : all)
    for (std::size_t i = 0; i < d->size(); ++i) {
      std::int64_t& o = out[rank - d->size() + i];
      const std::int64_t e = (*d)[i];
      if (e == o || e == 1) continue;
      if (o != 1) {
        std::string shapes;
        for (const auto* s : all) shapes += (shapes.empty() ? "" : " and ") + dims_repr(*s);
        throw value_error("shapes " + shapes + " do not broadcast");
      }
      o = e;
    }
  return out;
}

/// For each element of a tensor of dims `out`, the index of the element of `in` broadcast to it.
inline std::vector<std::size_t> broadcast_index(const std::vector<std::int64_t>& in, const std::vector<std::int64_t>& out) {
  const std::size_t rank = out.size(), shift = rank - in.size();
  std::vector<std::int64_t> stride(rank, 0);
  std::int64_t s = 1;
  for (std::size_t i = in.size(); i-- > 0;) {
    stride[shift + i] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  const auto n = static_cast<std::size_t>(folded_count(out, "output"));
  std::vector<std::size_t> index(n);
  std::vector<std::int64_t> pos(rank, 0);
  std::int64_t at = 0;
  for (std::size_t k = 0; k < n; ++k) {
    index[k] = static_cast<std::size_t>(at);
    for (std::size_t a = rank; a-- > 0;) {
      at += stride[a];
      if (++pos[a] < out[a]) break;
      at -= stride[a] * out[a];
      pos[a] = 0;
    }
  }
  return index;
}

/// An elementwise node over broadcast inputs: `f` maps the inputs' k-th elements (as double when
/// any input is real, else as int64) to the output's, of type `type`.
template <class IntF, class RealF>
host_tensor elementwise(const fold_node& n, std::int32_t type, IntF int_f, RealF real_f) {
  std::vector<const std::vector<std::int64_t>*> dims;
  bool real = false;
  for (std::size_t i = 0; i < n.in.size(); ++i) {
    dims.push_back(&n.input(i).dims);
    real = real || n.in[i].real();
  }
  host_tensor out = host_tensor::of(type, broadcast_dims(dims));
  std::vector<std::vector<std::size_t>> index;
  for (const host_tensor& h : n.in) index.push_back(broadcast_index(h.dims, out.dims));
  const std::size_t count = index.empty() ? 0 : index[0].size();
  for (std::size_t k = 0; k < count; ++k) {
    std::vector<double> r;
    std::vector<std::int64_t> z;
    for (std::size_t i = 0; i < n.in.size(); ++i) {
      if (real) r.push_back(n.in[i].real_at(index[i][k]));
      else z.push_back(n.in[i].ints[index[i][k]]);
    }
    if (out.real()) {
      const double v = real ? real_f(r) : static_cast<double>(int_f(z));
      out.reals.push_back(type == proto::TensorProto::FLOAT ? static_cast<double>(static_cast<float>(v)) : v);
    } else {
      out.ints.push_back(narrow_integer(real ? static_cast<std::int64_t>(real_f(r)) : int_f(z), type));
    }
  }
  return out;
}

/// A binary arithmetic node (its inputs' type): `f` over int64 or double.
template <class F>
host_tensor arithmetic(const fold_node& n, F f) {
  return elementwise(
      n, n.input(0).type, [&](const std::vector<std::int64_t>& v) { return f(v[0], v[1]); },
      [&](const std::vector<double>& v) { return f(v[0], v[1]); });
}

/// A comparison or logical node: a BOOL result.
template <class F>
host_tensor predicate(const fold_node& n, F f) {
  return elementwise(
      n, proto::TensorProto::BOOL, [&](const std::vector<std::int64_t>& v) -> std::int64_t { return f(v[0], v[1]); },
      [&](const std::vector<double>& v) -> double { return f(v[0], v[1]); });
}

/// Integer arithmetic of the folded values: value_error where int64 overflows or divides by zero.
inline std::int64_t int_divide(std::int64_t a, std::int64_t b) {
  if (b == 0) throw value_error("integer division by zero");
  if (a == std::numeric_limits<std::int64_t>::min() && b == -1) throw value_error("integer division overflows int64");
  return a / b;
}
inline std::int64_t int_add(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw value_error(std::to_string(a) + " + " + std::to_string(b) + " overflows int64");
  return r;
}
inline std::int64_t int_sub(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) throw value_error(std::to_string(a) + " - " + std::to_string(b) + " overflows int64");
  return r;
}
inline std::int64_t int_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw value_error(std::to_string(a) + " * " + std::to_string(b) + " overflows int64");
  return r;
}

}  // namespace tracemod::onnx::detail
