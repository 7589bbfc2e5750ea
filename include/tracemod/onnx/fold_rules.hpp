// The node types import computes at import time (fold.hpp), each with the attributes it reads and
// its evaluation over host tensors, following the ONNX operator definitions. docs/onnx.md lists them.
#pragma once

#include <tracemod/onnx/host_tensor.hpp>
#include <tracemod/onnx/proto.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>
#include <string>
#include <vector>

namespace tracemod::onnx::detail {

struct fold_rule {
  std::string op_type;
  std::vector<std::string> attributes;
  host_tensor (*fold)(const fold_node&);
};

/// ONNX Mod: fmod=0 takes the divisor's sign (integers only), fmod=1 the dividend's.
inline host_tensor fold_mod(const fold_node& n) {
  const bool c_style = attr_int(n.node, "fmod", 0) != 0;
  if (!c_style && n.input(0).real()) throw value_error("fmod=0 on " + elem_type_name(n.input(0).type) + " values (ONNX requires fmod=1)");
  return arithmetic(n, [&](auto a, auto b) {
    if constexpr (std::is_integral_v<decltype(a)>) {
      if (b == 0) throw value_error("integer modulo by zero");
      if (b == -1) return decltype(a){0};
      const auto r = a % b;
      return !c_style && r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
    } else {
      return std::fmod(a, b);
    }
  });
}

/// Shape and Size of a value whose extents import knows.
inline host_tensor fold_shape(const proto::NodeProto& n, const std::vector<std::int64_t>& dims, std::int64_t opset) {
  if (n.op_type() == "Size") {
    host_tensor out = host_tensor::of(proto::TensorProto::INT64, {});
    std::int64_t count = 1;  // the extents of a tensor import holds: the product fits
    for (std::int64_t d : dims) count *= d;
    out.ints.push_back(count);
    return out;
  }
  const auto rank = static_cast<std::int64_t>(dims.size());
  const auto clamp = [&](std::int64_t a) { return std::clamp(a < 0 ? a + rank : a, std::int64_t{0}, rank); };
  const std::int64_t start = opset >= 15 ? clamp(attr_int(n, "start", 0)) : 0;
  const std::int64_t end = opset >= 15 ? clamp(attr_int(n, "end", rank)) : rank;
  host_tensor out = host_tensor::of(proto::TensorProto::INT64, {std::max<std::int64_t>(end - start, 0)});
  for (std::int64_t a = start; a < end; ++a) out.ints.push_back(dims[static_cast<std::size_t>(a)]);
  return out;
}

inline host_tensor fold_gather(const fold_node& n) {
  const host_tensor& data = n.input(0);
  const std::vector<std::int64_t> idx = n.integers(1);
  if (data.rank() == 0) throw value_error("Gather from a scalar");
  const std::size_t axis = fold_axis(attr_int(n.node, "axis", 0), data.rank());
  std::vector<std::int64_t> dims(data.dims.begin(), data.dims.begin() + static_cast<std::ptrdiff_t>(axis));
  dims.insert(dims.end(), n.input(1).dims.begin(), n.input(1).dims.end());
  dims.insert(dims.end(), data.dims.begin() + static_cast<std::ptrdiff_t>(axis) + 1, data.dims.end());
  (void)folded_count(dims, "output");
  std::int64_t outer = 1, inner = 1;
  for (std::size_t a = 0; a < data.rank(); ++a) (a < axis ? outer : inner) *= a == axis ? 1 : data.dims[a];
  const std::int64_t extent = data.dims[axis];
  std::vector<std::size_t> index;
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i : idx) {
      if (i < -extent || i >= extent)
        throw value_error("index " + std::to_string(i) + " is out of range for axis " + std::to_string(axis) + " of " +
                          dims_repr(data.dims));
      const std::int64_t at = (o * extent + (i < 0 ? i + extent : i)) * inner;
      for (std::int64_t k = 0; k < inner; ++k) index.push_back(static_cast<std::size_t>(at + k));
    }
  return pick(data, dims, index);
}

inline host_tensor fold_concat(const fold_node& n) {
  const host_tensor& first = n.input(0);
  if (first.rank() == 0) throw value_error("Concat of scalars");
  const std::size_t axis = fold_axis(attr_int(n.node, "axis", 0), first.rank());
  std::vector<std::int64_t> dims = first.dims;
  dims[axis] = 0;
  for (std::size_t i = 0; i < n.in.size(); ++i) {
    const host_tensor& h = n.input(i);
    bool same = h.rank() == first.rank() && h.type == first.type;
    for (std::size_t a = 0; same && a < h.rank(); ++a) same = a == axis || h.dims[a] == first.dims[a];
    if (!same)
      throw value_error("input " + std::to_string(i) + " " + dims_repr(h.dims) + " " + elem_type_name(h.type) +
                        " does not join input 0 " + dims_repr(first.dims) + " " + elem_type_name(first.type) +
                        " on axis " + std::to_string(axis));
    dims[axis] += h.dims[axis];
  }
  (void)folded_count(dims, "output");
  std::int64_t outer = 1;
  for (std::size_t a = 0; a < axis; ++a) outer *= dims[a];
  host_tensor out = host_tensor::of(first.type, dims);
  for (std::int64_t o = 0; o < outer; ++o)
    for (const host_tensor& h : n.in) {
      const std::int64_t block = outer == 0 ? 0 : static_cast<std::int64_t>(h.size()) / outer;
      for (std::int64_t k = 0; k < block; ++k) out.push_from(h, static_cast<std::size_t>(o * block + k));
    }
  return out;
}

/// Unsqueeze, Squeeze, Reshape, Flatten and Identity: the same elements, other dims.
inline host_tensor with_dims(const host_tensor& h, std::vector<std::int64_t> dims) {
  if (folded_count(dims, "output") != static_cast<std::int64_t>(h.size()))
    throw value_error("cannot reshape " + dims_repr(h.dims) + " to " + dims_repr(dims));
  host_tensor out = h;
  out.dims = std::move(dims);
  return out;
}

inline std::vector<std::int64_t> fold_axes(const fold_node& n) {
  if (n.opset >= 13) return n.has(1) ? n.integers(1) : std::vector<std::int64_t>{};
  return attr_ints(n.node, "axes", {});
}

inline host_tensor fold_unsqueeze(const fold_node& n) {
  const host_tensor& x = n.input(0);
  const std::vector<std::int64_t> axes = fold_axes(n);
  const std::size_t rank = x.rank() + axes.size();
  std::vector<bool> inserted(rank, false);
  for (std::int64_t a : axes) {
    const std::size_t i = fold_axis(a, rank);
    if (inserted[i]) throw value_error("axis " + std::to_string(a) + " is given twice");
    inserted[i] = true;
  }
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0, j = 0; i < rank; ++i) dims.push_back(inserted[i] ? 1 : x.dims[j++]);
  return with_dims(x, dims);
}

inline host_tensor fold_squeeze(const fold_node& n) {
  const host_tensor& x = n.input(0);
  const std::vector<std::int64_t> axes = fold_axes(n);
  std::vector<bool> drop(x.rank(), axes.empty());
  if (axes.empty())
    for (std::size_t i = 0; i < x.rank(); ++i) drop[i] = x.dims[i] == 1;
  for (std::int64_t a : axes) {
    const std::size_t i = fold_axis(a, x.rank());
    if (x.dims[i] != 1) throw value_error("axis " + std::to_string(a) + " of " + dims_repr(x.dims) + " is not 1");
    drop[i] = true;
  }
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < x.rank(); ++i)
    if (!drop[i]) dims.push_back(x.dims[i]);
  return with_dims(x, dims);
}

inline host_tensor fold_reshape(const fold_node& n) {
  const host_tensor& x = n.input(0);
  std::vector<std::int64_t> dims = n.opset >= 5 ? n.integers(1) : attr_ints(n.node, "shape", {});
  const bool allowzero = attr_int(n.node, "allowzero", 0) != 0;
  std::int64_t known = 1;
  std::size_t infer = dims.size();
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allowzero) {
      if (i >= x.rank()) throw value_error("shape " + dims_repr(dims) + " copies axis " + std::to_string(i) + " of " + dims_repr(x.dims));
      dims[i] = x.dims[i];
    }
    if (dims[i] == -1) {
      if (infer != dims.size()) throw value_error("shape " + dims_repr(dims) + " has two -1");
      infer = i;
    } else {
      known = int_mul(known, std::max<std::int64_t>(dims[i], 1));
    }
  }
  if (infer != dims.size()) dims[infer] = static_cast<std::int64_t>(x.size()) / known;
  return with_dims(x, dims);
}

inline host_tensor fold_slice(const fold_node& n) {
  const host_tensor& x = n.input(0);
  const bool inputs = n.opset >= 10;
  const std::vector<std::int64_t> starts = inputs ? n.integers(1) : attr_ints(n.node, "starts", {});
  const std::vector<std::int64_t> ends = inputs ? n.integers(2) : attr_ints(n.node, "ends", {});
  std::vector<std::int64_t> axes = inputs ? (n.has(3) ? n.integers(3) : std::vector<std::int64_t>{}) : attr_ints(n.node, "axes", {});
  const std::vector<std::int64_t> steps = inputs && n.has(4) ? n.integers(4) : std::vector<std::int64_t>(starts.size(), 1);
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    throw value_error("starts, ends, axes and steps of different lengths");
  std::vector<std::int64_t> first(x.rank(), 0), step(x.rank(), 1), dims = x.dims;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::size_t a = fold_axis(axes[i], x.rank());
    const std::int64_t d = x.dims[a], s = steps[i];
    if (s == 0) throw value_error("step 0 on axis " + std::to_string(a));
    const auto bound = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) {
      if (v < 0) v = v < -d ? -d - 1 : v + d;  // without overflow for INT64_MIN
      return std::clamp(v, lo, hi);
    };
    const std::int64_t b = s > 0 ? bound(starts[i], 0, d) : bound(starts[i], 0, d - 1);
    const std::int64_t e = s > 0 ? bound(ends[i], 0, d) : bound(ends[i], -1, d - 1);
    first[a] = b;
    step[a] = s;
    // ceil((e - b) / s) elements, without overflow for any step (b and e lie in [-1, d]).
    if (s > 0) dims[a] = e > b ? 1 + (e - b - 1) / s : 0;
    else dims[a] = b > e ? 1 + (b - e - 1) / -std::max(s, -std::numeric_limits<std::int64_t>::max()) : 0;
  }
  const std::int64_t count = folded_count(dims, "output");
  std::vector<std::size_t> index;
  for (std::int64_t k = 0; k < count; ++k) {
    std::int64_t rest = k, at = 0, stride = 1;
    std::vector<std::int64_t> pos(x.rank());
    for (std::size_t a = x.rank(); a-- > 0;) {
      pos[a] = rest % dims[a];
      rest /= dims[a];
    }
    for (std::size_t a = x.rank(); a-- > 0;) {
      at += (first[a] + pos[a] * step[a]) * stride;
      stride *= x.dims[a];
    }
    index.push_back(static_cast<std::size_t>(at));
  }
  return pick(x, dims, index);
}

inline host_tensor fold_transpose(const fold_node& n) {
  const host_tensor& x = n.input(0);
  std::vector<std::int64_t> perm = attr_ints(n.node, "perm", {});
  if (perm.empty())
    for (std::size_t a = x.rank(); a-- > 0;) perm.push_back(static_cast<std::int64_t>(a));
  if (perm.size() != x.rank()) throw value_error("perm of " + std::to_string(perm.size()) + " axes for rank " + std::to_string(x.rank()));
  std::vector<std::int64_t> dims, stride(x.rank(), 1), out_stride;
  for (std::size_t a = x.rank(); a-- > 1;) stride[a - 1] = stride[a] * x.dims[a];
  std::vector<bool> seen(x.rank(), false);
  for (std::int64_t p : perm) {
    const std::size_t a = fold_axis(p, x.rank());
    if (seen[a]) throw value_error("perm lists axis " + std::to_string(a) + " twice");
    seen[a] = true;
    dims.push_back(x.dims[a]);
    out_stride.push_back(stride[a]);
  }
  std::vector<std::size_t> index;
  for (std::size_t k = 0; k < x.size(); ++k) {
    std::int64_t rest = static_cast<std::int64_t>(k), at = 0;
    for (std::size_t a = dims.size(); a-- > 0;) {
      at += rest % dims[a] * out_stride[a];
      rest /= dims[a];
    }
    index.push_back(static_cast<std::size_t>(at));
  }
  return pick(x, dims, index);
}

inline host_tensor fold_constant_of_shape(const fold_node& n) {
  const std::vector<std::int64_t> dims = n.integers(0);
  host_tensor value = host_tensor::of(proto::TensorProto::FLOAT, {1});
  value.reals.push_back(0);
  if (const proto::AttributeProto* a = find_attr(n.node, "value")) value = host_of(a->t(), "attribute 'value'");
  if (value.size() != 1) throw value_error("attribute 'value' holds " + std::to_string(value.size()) + " elements, not one");
  const auto count = static_cast<std::size_t>(folded_count(dims, "output"));
  return pick(value, dims, std::vector<std::size_t>(count, 0));
}

inline host_tensor fold_expand(const fold_node& n) {
  const host_tensor& x = n.input(0);
  const std::vector<std::int64_t> shape = n.integers(1);
  const std::vector<std::int64_t> dims = broadcast_dims({&x.dims, &shape});
  return pick(x, dims, broadcast_index(x.dims, dims));
}

inline host_tensor fold_where(const fold_node& n) {
  const host_tensor &c = n.input(0), &x = n.input(1), &y = n.input(2);
  if (x.type != y.type) throw value_error("X is " + elem_type_name(x.type) + " and Y " + elem_type_name(y.type));
  host_tensor out = host_tensor::of(x.type, broadcast_dims({&c.dims, &x.dims, &y.dims}));
  const std::vector<std::size_t> ci = broadcast_index(c.dims, out.dims), xi = broadcast_index(x.dims, out.dims),
                                 yi = broadcast_index(y.dims, out.dims);
  for (std::size_t k = 0; k < ci.size(); ++k) out.push_from(c.real_at(ci[k]) != 0 ? x : y, c.real_at(ci[k]) != 0 ? xi[k] : yi[k]);
  return out;
}

inline host_tensor fold_range(const fold_node& n) {
  const host_tensor& start = n.input(0);
  for (std::size_t i = 0; i < 3; ++i)
    if (n.input(i).size() != 1 || n.input(i).type != start.type) throw value_error("start, limit and delta must be scalars of one type");
  const double s = start.real_at(0), l = n.input(1).real_at(0), d = n.input(2).real_at(0);
  if (d == 0) throw value_error("delta 0");
  const double count = std::max(std::ceil((l - s) / d), 0.0);
  if (!(count <= static_cast<double>(folded_limit))) throw value_error("a range of more than " + std::to_string(folded_limit) + " values");
  host_tensor out = host_tensor::of(start.type, {static_cast<std::int64_t>(count)});
  for (std::int64_t k = 0; k < out.dims[0]; ++k) {
    if (out.real()) out.reals.push_back(s + static_cast<double>(k) * d);
    else out.ints.push_back(int_add(start.ints[0], int_mul(k, n.input(2).ints[0])));
  }
  return out;
}

/// ScatterND without reduction: data with the slices at `indices` replaced by `updates`.
inline host_tensor fold_scatter_nd(const fold_node& n) {
  if (attr_string(n.node, "reduction", "none") != "none") throw value_error("reduction " + attr_string(n.node, "reduction", ""));
  host_tensor out = n.input(0);
  const host_tensor &indices = n.input(1), &updates = n.input(2);
  const std::vector<std::int64_t> idx = n.integers(1);
  if (indices.rank() == 0 || indices.dims.back() > static_cast<std::int64_t>(out.rank()) || updates.type != out.type)
    throw value_error("indices " + dims_repr(indices.dims) + " and updates " + dims_repr(updates.dims) + " do not index data " + dims_repr(out.dims));
  const auto k = static_cast<std::size_t>(indices.dims.back());
  std::int64_t slice = 1;
  for (std::size_t a = k; a < out.rank(); ++a) slice *= out.dims[a];
  const std::size_t tuples = k == 0 ? 0 : idx.size() / k;
  if (static_cast<std::int64_t>(updates.size()) != static_cast<std::int64_t>(tuples) * slice)
    throw value_error("updates " + dims_repr(updates.dims) + " do not match indices " + dims_repr(indices.dims) + " into " + dims_repr(out.dims));
  for (std::size_t t = 0; t < tuples; ++t) {
    std::int64_t at = 0;
    for (std::size_t a = 0; a < k; ++a) {
      std::int64_t i = idx[t * k + a];
      const std::int64_t d = out.dims[a];
      if (i < -d || i >= d) throw value_error("index " + std::to_string(i) + " is out of range for axis " + std::to_string(a) + " of " + dims_repr(out.dims));
      at = at * d + (i < 0 ? i + d : i);
    }
    for (std::int64_t e = 0; e < slice; ++e) {
      const auto dst = static_cast<std::size_t>(at * slice + e), src = static_cast<std::size_t>(static_cast<std::int64_t>(t) * slice + e);
      if (out.real()) out.reals[dst] = updates.reals[src];
      else out.ints[dst] = updates.ints[src];
    }
  }
  return out;
}

inline host_tensor fold_cast(const fold_node& n) {
  const std::int64_t to = attr_int(n.node, "to", proto::TensorProto::UNDEFINED);
  if (!proto::TensorProto_DataType_IsValid(static_cast<int>(to)) ||
      (!host_tensor::is_real(static_cast<std::int32_t>(to)) && element_bytes(static_cast<std::int32_t>(to)) == 0) ||
      to == proto::TensorProto::FLOAT16 || to == proto::TensorProto::BFLOAT16 || to == proto::TensorProto::UINT64 ||
      to == proto::TensorProto::COMPLEX64 || to == proto::TensorProto::COMPLEX128)
    throw value_error("to=" + elem_type_name(static_cast<std::int32_t>(to)));
  return cast_host(n.input(0), static_cast<std::int32_t>(to), "Cast");
}

/// Not, Neg and Abs: one input, its type (Not: BOOL).
inline host_tensor fold_unary(const fold_node& n) {
  const std::string& op = n.node.op_type();
  const auto f = [&](auto v) -> decltype(v) {
    if (op == "Not") return v == 0;
    if constexpr (std::is_integral_v<decltype(v)>) return op == "Neg" || v < 0 ? int_sub(0, v) : v;
    else return op == "Neg" || v < 0 ? -v : v;
  };
  return elementwise(
      n, n.input(0).type, [&](const std::vector<std::int64_t>& v) { return f(v[0]); },
      [&](const std::vector<double>& v) { return f(v[0]); });
}

/// Max and Min over any number of inputs.
inline host_tensor fold_extreme(const fold_node& n) {
  const bool max = n.node.op_type() == "Max";
  const auto f = [&](const auto& v) {
    auto r = v[0];
    for (const auto& e : v) r = max ? std::max(r, e) : std::min(r, e);
    return r;
  };
  return elementwise(n, n.input(0).type, f, f);
}

inline host_tensor fold_binary(const fold_node& n) {
  const std::string& op = n.node.op_type();
  if (n.in.size() != 2 || n.input(0).type != n.input(1).type)
    throw value_error(op + " of " + elem_type_name(n.input(0).type) + " and " + elem_type_name(n.input(1).type));
  // Integers: exact int64 arithmetic, refused where it overflows.
  const auto integer_or_real = [](auto int_f, auto real_f) {
    return [=](auto a, auto b) {
      if constexpr (std::is_integral_v<decltype(a)>) return int_f(a, b);
      else return real_f(a, b);
    };
  };
  if (op == "Add") return arithmetic(n, integer_or_real(int_add, [](double a, double b) { return a + b; }));
  if (op == "Sub") return arithmetic(n, integer_or_real(int_sub, [](double a, double b) { return a - b; }));
  if (op == "Mul") return arithmetic(n, integer_or_real(int_mul, [](double a, double b) { return a * b; }));
  if (op == "Div") return arithmetic(n, integer_or_real(int_divide, [](double a, double b) { return a / b; }));
  if (op == "Equal") return predicate(n, [](auto a, auto b) { return a == b; });
  if (op == "Less") return predicate(n, [](auto a, auto b) { return a < b; });
  if (op == "LessOrEqual") return predicate(n, [](auto a, auto b) { return a <= b; });
  if (op == "Greater") return predicate(n, [](auto a, auto b) { return a > b; });
  if (op == "GreaterOrEqual") return predicate(n, [](auto a, auto b) { return a >= b; });
  if (op == "And") return predicate(n, [](auto a, auto b) { return a != 0 && b != 0; });
  if (op == "Or") return predicate(n, [](auto a, auto b) { return a != 0 || b != 0; });
  return predicate(n, [](auto a, auto b) { return (a != 0) != (b != 0); });  // Xor
}

/// Shape and Size of a static value (of a graph tensor, fold() reads its extents).
inline host_tensor fold_shape_of_value(const fold_node& n) { return fold_shape(n.node, n.input(0).dims, n.opset); }

inline const std::vector<fold_rule>& fold_rules() {
  static const std::vector<fold_rule> rules = [] {
    std::vector<fold_rule> r{
        {"Shape", {"start", "end"}, &fold_shape_of_value},
        {"Size", {}, &fold_shape_of_value},
        {"Gather", {"axis"}, &fold_gather},
        {"Concat", {"axis"}, &fold_concat},
        {"Unsqueeze", {"axes"}, &fold_unsqueeze},
        {"Squeeze", {"axes"}, &fold_squeeze},
        {"Reshape", {"allowzero", "shape"}, &fold_reshape},
        {"Slice", {"starts", "ends", "axes"}, &fold_slice},
        {"Transpose", {"perm"}, &fold_transpose},
        {"Cast", {"to"}, &fold_cast},
        {"ConstantOfShape", {"value"}, &fold_constant_of_shape},
        {"Expand", {}, &fold_expand},
        {"Where", {}, &fold_where},
        {"Range", {}, &fold_range},
        {"ScatterND", {"reduction"}, &fold_scatter_nd},
        {"Mod", {"fmod"}, &fold_mod},
        {"Max", {}, &fold_extreme},
        {"Min", {}, &fold_extreme},
    };
    for (const char* op : {"Not", "Neg", "Abs"}) r.push_back({op, {}, &fold_unary});
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor"})
      r.push_back({op, {}, &fold_binary});
    return r;
  }();
  return rules;
}

[[nodiscard]] inline const fold_rule* find_fold_rule(std::string_view op_type) {
  for (const fold_rule& r : fold_rules())
    if (r.op_type == op_type) return &r;
  return nullptr;
}

}  // namespace tracemod::onnx::detail
