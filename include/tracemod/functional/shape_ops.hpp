// Shape manipulation: flatten and reshape (views sharing the input's buffer), transpose and concat
// (copies through the layout kernels).
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/layout.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace tracemod::functional {

namespace detail {

/// ONNX's view of a tensor as 2-D at `axis`: (d0 * ... * d(axis-1), d(axis) * ... * dn).
inline int_list to_2d(const Shape& x, std::size_t axis) {
  std::int64_t rows = 1, cols = 1;
  for (std::size_t i = 0; i < x.rank(); ++i) (i < axis ? rows : cols) *= x[i];
  return {rows, cols};
}
inline int_list as_list(const Shape& s) {
  int_list l;
  for (std::int64_t d : s) l.push_back(d);
  return l;
}

/// `axes` normalised against `rank` (negative axes count from the end), each at most once.
inline std::vector<bool> onnx_axis_set(onnx_import_context& cx, const std::vector<std::int64_t>& axes, std::size_t rank) {
  std::vector<bool> in(rank, false);
  for (std::int64_t a : axes) {
    const std::size_t i = normalize_axis(a, rank, cx.op_type());
    if (in[i]) cx.unsupported("axes=" + ints_repr(axes) + " names axis " + std::to_string(i) + " twice");
    in[i] = true;
  }
  return in;
}

}  // namespace detail

/// A base of the ops that move elements without changing them (flatten, reshape, transpose): one
/// tensor operand, and scaling commutes with them.
template <class Derived>
struct data_movement_op : op_base<Derived> {
  static constexpr scale_rule scaling = scale_rule::linear;
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
};

struct flatten_params {
  std::int64_t start_axis = 0;
  std::int64_t end_axis = -1;
};

/// Merges axes start_axis..end_axis into one (MegEngine's argument names).
struct flatten_fn : data_movement_op<flatten_fn> {
  static constexpr std::string_view name = "flatten";
  static constexpr std::string_view target = "tensor.flatten";
  static constexpr bool any_dtype = true;  // a view moves no data, so any dtype passes through
  using params = flatten_params;
  static constexpr std::tuple fields{positional("start_axis", &params::start_axis),
                                     positional("end_axis", &params::end_axis)};

  static constexpr Shape infer_shape(const params& p, const Shape& x) {
    if (x.rank() == 0) return Shape{1};
    const std::size_t s = normalize_axis(p.start_axis, x.rank(), target);
    const std::size_t e = normalize_axis(p.end_axis, x.rank(), target);
    if (s > e)
      throw value_error(std::string(target) + ": start_axis " + std::to_string(p.start_axis) + " comes after end_axis " +
                        std::to_string(p.end_axis) + " for shape " + x.to_string());
    Shape out(x.begin(), x.begin() + s);
    (void)x.numel(target);  // a symbolic shape may be unallocatable; then the merged extent would overflow
    std::int64_t merged = 1;
    for (std::size_t i = s; i <= e; ++i) merged *= x[i];
    out.push_back(merged);
    for (std::size_t i = e + 1; i < x.rank(); ++i) out.push_back(x[i]);
    return out;
  }

  /// The leading axes, the product of the merged ones, the trailing axes.
  static Dims infer_dims(const params& p, const ShapeDims& x) {
    if (x.dims.empty()) return {1};
    const std::size_t s = normalize_axis(p.start_axis, x.dims.size(), target);
    const std::size_t e = normalize_axis(p.end_axis, x.dims.size(), target);
    Dims out(x.dims.begin(), x.dims.begin() + static_cast<std::ptrdiff_t>(s));
    out.push_back(::tracemod::numel(Dims(x.dims.begin() + static_cast<std::ptrdiff_t>(s), x.dims.begin() + static_cast<std::ptrdiff_t>(e) + 1)));
    out.insert(out.end(), x.dims.begin() + static_cast<std::ptrdiff_t>(e) + 1, x.dims.end());
    return out;
  }

  static Tensor eager(const params& p, const Tensor& x) {
    require_defined(target, "inp", x);  // any dtype: a view moves no data
    return x.reshape(infer_shape(p, x.shape()));
  }

  static void onnx_export(onnx_export_context& cx, const params& p) {
    const Shape& x = cx.input(0).shape;
    if (x.rank() == 0) {
      cx.node("Reshape", {cx.input(0).name, cx.graph().ints({1}, "shape")}, {cx.output()});
      return;
    }
    const std::size_t s = normalize_axis(p.start_axis, x.rank(), cx.call().where);
    const std::size_t end = normalize_axis(p.end_axis, x.rank(), cx.call().where);
    if (s == 1 && end + 1 == x.rank()) {  // ONNX's Flatten: (d0, d1 * ... * dn)
      cx.node("Flatten", {cx.input(0).name}, {cx.output()}, {{"axis", std::int64_t{1}}});
      return;
    }
    // Leading axes are copied (0), the merged one inferred (-1): valid for any batch size.
    std::vector<std::int64_t> shape(s, 0);
    shape.push_back(-1);
    for (std::size_t i = end + 1; i < x.rank(); ++i) shape.push_back(x[i]);
    cx.node("Reshape", {cx.input(0).name, cx.graph().ints(shape, "shape")}, {cx.output()});
  }
  static constexpr std::array onnx_import_types{std::string_view("Flatten")};
  static constexpr std::array onnx_import_attributes{std::string_view("axis")};
  static void onnx_import(onnx_import_context& cx);
};
inline constexpr flatten_fn flatten{};
TRACEMOD_REGISTER_BUILTIN_OP(flatten_fn);

struct reshape_params {
  int_list target_shape;
};

/// A new shape with the same number of elements; one extent may be -1 (inferred).
struct reshape_fn : data_movement_op<reshape_fn> {
  static constexpr std::string_view name = "reshape";
  static constexpr std::string_view target = "tensor.reshape";
  static constexpr bool any_dtype = true;  // a view moves no data, so any dtype passes through
  using params = reshape_params;
  static constexpr std::tuple fields{required("target_shape", &params::target_shape)};

  /// A shape value keeps its elements, in order (ONNX's Unsqueeze of an extent imports as a reshape).
  static std::optional<ShapeValue> infer_value(const params&, const ShapeDims& x) {
    return x.value != nullptr ? std::optional<ShapeValue>(*x.value) : std::nullopt;
  }

  static constexpr Shape infer_shape(const params& p, const Shape& x) {
    const auto fail = [&](const std::string& why) {
      return shape_error(std::string(target) + ": cannot reshape " + x.to_string() + " (" + std::to_string(x.numel()) +
                         " elements) into " + repr(p.target_shape) + ": " + why);
    };
    std::int64_t known = 1;
    std::size_t inferred = p.target_shape.size();
    for (std::size_t i = 0; i < p.target_shape.size(); ++i) {
      const std::int64_t d = p.target_shape[i];
      if (d == -1) {
        if (inferred != p.target_shape.size()) throw fail("more than one -1");
        inferred = i;
      } else if (d < 0) {
        throw fail("negative extent " + std::to_string(d));
      } else {
        if (__builtin_mul_overflow(known, d, &known)) throw fail("the target's element count overflows int64");
      }
    }
    Shape out;
    for (std::size_t i = 0; i < p.target_shape.size(); ++i) {
      if (i != inferred) {
        out.push_back(p.target_shape[i]);
      } else {
        if (known == 0 || x.numel() % known != 0) throw fail("the -1 extent cannot be inferred");
        out.push_back(x.numel() / known);
      }
    }
    if (out.numel(target) != x.numel(target)) throw fail("element counts differ");
    return out;
  }
  /// The target extents; a -1 is the input's element count divided by the others' product (a
  /// reshape without -1 has a static result, and the run checks the element count).
  static Dims infer_dims(const params& p, const ShapeDims& x) {
    std::int64_t known = 1;
    for (std::int64_t d : p.target_shape)
      if (d != -1) known *= d;
    Dims out;
    for (std::int64_t d : p.target_shape) out.push_back(d == -1 ? ::tracemod::numel(x.dims) / known : DimExpr(d));
    return out;
  }

  static Tensor eager(const params& p, const Tensor& x) {
    require_defined(target, "inp", x);  // any dtype: a view moves no data
    return x.reshape(infer_shape(p, x.shape()));
  }

  static void onnx_export(onnx_export_context& cx, const params& p) {
    std::vector<std::int64_t> shape(p.target_shape.begin(), p.target_shape.end());
    const bool has_zero = std::find(shape.begin(), shape.end(), 0) != shape.end();
    const Shape& x = cx.input(0).shape;
    // A target that keeps the traced batch size in front copies it (0), so any batch size reshapes.
    if (cx.graph().dynamic_batch() && !has_zero && !shape.empty() && x.rank() >= 1 && shape[0] == x[0]) shape[0] = 0;
    std::vector<onnx_attribute> attributes;
    if (has_zero) attributes.push_back({"allowzero", std::int64_t{1}});  // a literal zero extent, not "copy"
    cx.node("Reshape", {cx.input(0).name, cx.graph().ints(shape, "shape")}, {cx.output()}, attributes);
  }
  /// Reshape, and Unsqueeze and Squeeze: a reshape to the shape they compute.
  static std::vector<onnx_import_rule> onnx_imports() {
    return {{"Reshape", {"allowzero", "shape"}, {1}, &import_reshape},
            {"Unsqueeze", {"axes"}, {1}, &import_unsqueeze},
            {"Squeeze", {"axes"}, {1}, &import_squeeze}};
  }

 private:
  static void import_reshape(onnx_import_context& cx) {
    const onnx_value x = cx.tensor(0);
    // A shape computed at run time (from Shape of a dynamic input) is read then (shape_values.hpp):
    // by tensor.reshape_to with allowzero=1 (a 0 is a zero extent), else by tensor.onnx_reshape_to
    // (a 0 copies the input's extent).
    if (cx.input_count() > 1 && !cx.is_static(1))
      return cx.bind(cx.call(cx.attr_int("allowzero", 0) != 0 ? "tensor.reshape_to" : "tensor.onnx_reshape_to",
                             {x, cx.tensor(1)}, {}));
    // before opset 5 the shape was an attribute
    const std::vector<std::int64_t> target = cx.input_count() > 1 ? cx.integers(1, "shape") : cx.attr_ints("shape");
    const bool allowzero = cx.attr_int("allowzero", 0) != 0;
    int_list shape;
    for (std::size_t i = 0; i < target.size(); ++i) {
      const std::int64_t d = target[i];
      if (d == 0 && !allowzero) {
        if (i >= cx.shape(x).rank()) cx.unsupported("a 0 in shape past the input's rank");
        shape.push_back(cx.shape(x)[i]);  // ONNX: 0 copies the input's extent
      } else {
        shape.push_back(d);
      }
    }
    cx.bind(cx.call<reshape_fn>({shape}, x));
  }
  /// Unsqueeze's axes index the output.
  static void import_unsqueeze(onnx_import_context& cx) {
    const onnx_value x = cx.tensor(0);
    const Shape& s = cx.shape(x);
    const std::optional<std::vector<std::int64_t>> axes = cx.axes();
    if (!axes) cx.unsupported("Unsqueeze without axes");
    const std::size_t rank = s.rank() + axes->size();
    if (rank > Shape::max_rank)
      cx.unsupported("a result of rank " + std::to_string(rank) + " (at most " + std::to_string(Shape::max_rank) + ")");
    const std::vector<bool> inserted = detail::onnx_axis_set(cx, *axes, rank);
    int_list out;
    for (std::size_t i = 0, j = 0; i < rank; ++i) out.push_back(inserted[i] ? 1 : s[j++]);
    cx.bind(cx.call<reshape_fn>({out}, x));
  }
  /// Squeeze's axes index the input and must have extent 1; without axes every extent of 1 goes.
  static void import_squeeze(onnx_import_context& cx) {
    const onnx_value x = cx.tensor(0);
    const Shape& s = cx.shape(x);
    const std::optional<std::vector<std::int64_t>> axes = cx.axes();
    std::vector<bool> removed(s.rank(), false);
    if (axes) {
      removed = detail::onnx_axis_set(cx, *axes, s.rank());
      for (std::size_t i = 0; i < s.rank(); ++i)
        if (removed[i] && s[i] != 1)
          throw shape_error("Squeeze: axis " + std::to_string(i) + " of an input of shape " + s.to_string() +
                            " has extent " + std::to_string(s[i]) + ", not 1");
    } else {
      for (std::size_t i = 0; i < s.rank(); ++i) removed[i] = s[i] == 1;
    }
    int_list out;
    for (std::size_t i = 0; i < s.rank(); ++i)
      if (!removed[i]) out.push_back(s[i]);
    cx.bind(cx.call<reshape_fn>({out}, x));
  }
};
inline constexpr reshape_fn reshape{};
TRACEMOD_REGISTER_BUILTIN_OP(reshape_fn);

inline void flatten_fn::onnx_import(onnx_import_context& cx) {
  const onnx_value x = cx.tensor(0);
  const Shape& s = cx.shape(x);
  const std::int64_t axis = cx.attr_int("axis", 1);
  const auto a = axis < 0 ? axis + static_cast<std::int64_t>(s.rank()) : axis;
  if (a < 0 || a > static_cast<std::int64_t>(s.rank()))
    cx.unsupported("attribute axis=" + std::to_string(axis) + " for an input of shape " + s.to_string());
  if (a == 1 && s.rank() >= 2)
    cx.bind(cx.call<flatten_fn>({.start_axis = 1, .end_axis = -1}, x));
  else
    cx.bind(cx.call<reshape_fn>({detail::to_2d(s, static_cast<std::size_t>(a))}, x));
}

struct transpose_params {
  int_list pattern;
};

/// Permutes the axes: output axis i is input axis pattern[i] (MegEngine's F.transpose).
struct transpose_fn : data_movement_op<transpose_fn> {
  static constexpr std::string_view name = "transpose";
  static constexpr std::string_view target = "tensor.transpose";
  using params = transpose_params;
  static constexpr std::tuple fields{required("pattern", &params::pattern)};

  static std::array<std::size_t, Shape::max_rank> permutation(const params& p, const Shape& x) {
    // Only negative axes are checked here (they have no size_t form); transposed_shape checks the rest.
    std::array<std::size_t, Shape::max_rank> perm{};
    for (std::size_t i = 0; i < p.pattern.size(); ++i) {
      if (p.pattern[i] < 0)
        throw value_error(std::string(target) + ": pattern " + repr(p.pattern) + " is not a permutation of the axes of " +
                          x.to_string());
      perm[i] = static_cast<std::size_t>(p.pattern[i]);
    }
    return perm;
  }
  static Dims infer_dims(const params& p, const ShapeDims& x) {
    Dims out;
    for (std::int64_t a : p.pattern) out.push_back(x.dims[static_cast<std::size_t>(a)]);
    return out;
  }
  static Shape infer_shape(const params& p, const Shape& x) {
    const auto perm = permutation(p, x);
    return kernels::transposed_shape(x, std::span<const std::size_t>(perm.data(), p.pattern.size()), target);
  }
  static Tensor eager(const params& p, const Tensor& x) {
    require_float32(target, "inp", x);
    const auto perm = permutation(p, x.shape());
    const std::span<const std::size_t> pspan(perm.data(), p.pattern.size());
    Tensor y = Tensor::empty(kernels::transposed_shape(x.shape(), pspan, target), DType::float32, target);
    kernels::transpose(x.data<float>(), x.shape(), pspan, y.data<float>());
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params& p) {
    cx.node("Transpose", {cx.input(0).name}, {cx.output()},
            {{"perm", std::vector<std::int64_t>(p.pattern.begin(), p.pattern.end())}});
  }
  static constexpr std::array onnx_import_types{std::string_view("Transpose")};
  static constexpr std::array onnx_import_attributes{std::string_view("perm")};
  static void onnx_import(onnx_import_context& cx) {
    const onnx_value x = cx.tensor(0);
    std::vector<std::int64_t> reversed;
    for (std::size_t i = cx.shape(x).rank(); i-- > 0;) reversed.push_back(static_cast<std::int64_t>(i));
    int_list perm;
    for (std::int64_t p : cx.attr_ints("perm", reversed)) perm.push_back(p);
    cx.bind(cx.call<transpose_fn>({perm}, x));
  }
};
inline constexpr transpose_fn transpose{};
TRACEMOD_REGISTER_BUILTIN_OP(transpose_fn);

struct concat_params {
  std::int64_t axis = 0;
};

/// Joins tensors along an existing axis.
struct concat_fn : op_base<concat_fn> {
  static constexpr std::string_view name = "concat";
  static constexpr std::string_view target = "tensor.concat";
  static constexpr scale_rule scaling = scale_rule::linear;  // moves elements, never changes them
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inps", operand_kind::tensor_list}};
  using params = concat_params;
  static constexpr std::tuple fields{positional("axis", &params::axis)};

  /// The first input's dims with the sum of the inputs' extents on `axis`.
  static Dims infer_dims(const params& p, std::span<const ShapeDims> inps) {
    const std::size_t axis = normalize_axis(p.axis, inps[0].dims.size(), target);
    Dims out = inps[0].dims;
    for (std::size_t i = 1; i < inps.size(); ++i) out[axis] = out[axis] + inps[i].dims[axis];
    return out;
  }
  static Shape infer_shape(const params& p, std::span<const Shape> shapes) {
    if (shapes.empty()) throw value_error(std::string(target) + ": needs at least one input");
    const std::size_t axis = normalize_axis(p.axis, shapes[0].rank(), target);
    return kernels::concat_shape(shapes.data(), shapes.size(), axis, target);
  }
  /// Of 1-D shape values joined (a shape built from pieces, as torch.onnx writes `x.view(n, -1)`),
  /// their elements in order.
  static std::optional<ShapeValue> infer_value(const params&, std::span<const ShapeDims> inps) {
    ShapeValue v;
    for (const ShapeDims& x : inps) {
      if (x.value == nullptr || x.shape.rank() != 1) return std::nullopt;
      v.dims.insert(v.dims.end(), x.value->dims.begin(), x.value->dims.end());
      v.example.insert(v.example.end(), x.value->example.begin(), x.value->example.end());
    }
    if (inps.empty()) return std::nullopt;
    return v;
  }

  /// float32, or int32 (shapes built as values); one dtype for all inputs.
  static constexpr bool any_dtype = true;
  static Tensor eager(const params& p, std::span<const Tensor> inps) {
    const std::vector<Shape> shapes = joined_shapes_of(target, inps);
    const DType dtype = inps.empty() ? DType::float32 : inps[0].dtype();
    Tensor y = Tensor::empty(infer_shape(p, shapes), dtype, target);
    const auto join = [&]<class T>(T*) {
      std::vector<const T*> data;
      for (const Tensor& t : inps) data.push_back(t.data<T>());
      kernels::concat(data.data(), shapes.data(), shapes.size(), normalize_axis(p.axis, shapes[0].rank(), target),
                      y.data<T>());
    };
    if (dtype == DType::int32)
      join(static_cast<std::int32_t*>(nullptr));
    else
      join(static_cast<float*>(nullptr));
    return y;
  }
  static Tensor eager(const params& p, const std::vector<Tensor>& inps) { return eager(p, std::span<const Tensor>(inps)); }
  template <class... T>
  static Tensor eager(const params& p, const std::tuple<T...>& inps) {
    return eager(p, std::apply([](const auto&... t) { return std::vector<Tensor>{Tensor(t)...}; }, inps));
  }

  static void onnx_export(onnx_export_context& cx, const params& p) {
    std::vector<std::string> in;
    for (const onnx_operand& o : cx.input(0).list) in.push_back(o.name);
    const std::size_t axis = normalize_axis(p.axis, cx.output_shape().rank(), cx.call().where);
    cx.node("Concat", in, {cx.output()}, {{"axis", static_cast<std::int64_t>(axis)}});
  }
  static constexpr std::array onnx_import_types{std::string_view("Concat")};
  static constexpr std::array onnx_import_attributes{std::string_view("axis")};
  static void onnx_import(onnx_import_context& cx) {
    std::vector<onnx_value> in;
    for (int i = 0; i < cx.input_count(); ++i) in.push_back(cx.tensor(i));
    cx.bind(cx.call<concat_fn>({cx.attr_int("axis", 0)}, std::move(in)));
  }

  /// A braced list of tensors is a vector: F::concat({a, b}, 1), F::concat({a, b}, {.axis = 1}).
  using op_base::operator();
  template <std::derived_from<Tensor> T, class... Rest>
  decltype(auto) operator()(std::initializer_list<T> inps, const Rest&... rest) const {
    return (*this)(std::vector<Tensor>(inps.begin(), inps.end()), rest...);
  }
  template <std::derived_from<Tensor> T>
  decltype(auto) operator()(std::initializer_list<T> inps, const params& p) const {
    return (*this)(std::vector<Tensor>(inps.begin(), inps.end()), p);
  }
};
inline constexpr concat_fn concat{};
TRACEMOD_REGISTER_BUILTIN_OP(concat_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
