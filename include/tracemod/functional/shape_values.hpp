// Shapes as values: F::shape_of(x) is x's shape as an int32 tensor (MegEngine's GetVarShape),
// F::size(x, axis) one extent of it, and F::reshape_to(x, shape) reshapes to a shape held in an
// int32 tensor. Recorded on tmod::Sym, they keep the shape arithmetic in the graph, so a forward
// that reshapes with `x.size(0)` runs at any batch size once traced with a dynamic one:
//
//   F::reshape_to(x, F::tensor_from_list(F::size(x, 0), -1))   // x.view(x.size(0), -1)
//
// While a graph is recorded, each int32 value computed from shapes carries its ShapeValue
// (core/dim.hpp): an expression per element over the graph's symbols, which getitem, stack,
// tensor_from_list and astype carry on (their infer_value), and from which reshape_to states its
// symbolic output shape. F::expand_to(x, shape) broadcasts to such a shape (torch's
// `x.expand(x.size(0), -1, -1)`).
#pragma once

#include <tracemod/functional/astype.hpp>
#include <tracemod/functional/broadcast_to.hpp>
#include <tracemod/functional/indexing.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/shape_ops.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace tracemod::functional {

namespace detail {

/// An ONNX node of `type` reading the input's extents (Shape, Size), whose INT64 result is cast to
/// tracemod's int32.
inline void onnx_export_int64_read(onnx_export_context& cx, const std::string& type) {
  const std::string s = cx.node1(type, {cx.input(0).name}, cx.fresh(cx.output() + "_int64"));
  cx.node("Cast", {s}, {cx.output()}, {{"to", onnx_int32}});
}

}  // namespace detail

/// x's shape as a 1-D int32 tensor of x's rank (MegEngine's GetVarShape; torch's `x.shape` under
/// tracing). Any dtype; extents above int32's range are a value_error.
struct shape_of_fn : op_base<shape_of_fn> {
  static constexpr std::string_view name = "getvarshape";
  static constexpr std::string_view target = "GetVarShape";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = no_params;
  static constexpr std::tuple<> fields{};

  static constexpr Shape infer_shape(const params&, const Shape& x) {
    return Shape{static_cast<std::int64_t>(x.rank())};
  }
  static Dims infer_dims(const params&, const ShapeDims& x) { return {static_cast<std::int64_t>(x.dims.size())}; }
  static DType infer_dtype(const params*, std::span<const DType>) { return DType::int32; }
  /// The operand's dims, extent by extent.
  static std::optional<ShapeValue> infer_value(const params&, const ShapeDims& x) {
    return ShapeValue{x.dims, std::vector<std::int64_t>(x.shape.begin(), x.shape.end())};
  }
  static op_cost cost(const params&, const Shape&, const Shape&) { return {}; }

  static Tensor eager(const params&, const Tensor& x) {
    require_defined(target, "inp", x);
    Tensor y = Tensor::empty(Shape{static_cast<std::int64_t>(x.shape().rank())}, DType::int32, target);
    for (std::size_t i = 0; i < x.shape().rank(); ++i) {
      if (x.shape()[i] > std::numeric_limits<std::int32_t>::max())
        throw value_error(std::string(target) + ": extent " + std::to_string(x.shape()[i]) + " of " +
                          x.shape().to_string() + " does not fit in int32");
      y.data<std::int32_t>()[i] = static_cast<std::int32_t>(x.shape()[i]);
    }
    return y;
  }

  /// ONNX's Shape gives int64: cast to tracemod's int32.
  static void onnx_export(onnx_export_context& cx, const params&) { detail::onnx_export_int64_read(cx, "Shape"); }
  /// A Shape of an input with dynamic dims (import computes the others at import time, onnx/fold.hpp);
  /// its INT64 result is int32 here, as every integer tracemod computes shapes with.
  static constexpr std::array onnx_import_types{std::string_view("Shape")};
  static void onnx_import(onnx_import_context& cx) { cx.bind(cx.call<shape_of_fn>({}, cx.tensor(0))); }
};
inline constexpr shape_of_fn shape_of{};
TRACEMOD_REGISTER_BUILTIN_OP(shape_of_fn);

/// Extent `axis` of x as a rank-0 int32 tensor: F::getitem(F::shape_of(x), axis), so a graph records
/// it as MegEngine does (GetVarShape, then __getitem__).
template <class X>
auto size(const X& x, std::int64_t axis) {
  return getitem(shape_of(x), axis);
}

/// x's element count as a rank-0 int32 tensor (torch's `x.numel()` under tracing): the product of
/// F::shape_of(x), recorded as one call whose value is the product of x's dims. Any dtype; a count
/// above int32's range is a value_error.
struct numel_fn : op_base<numel_fn> {
  static constexpr std::string_view name = "numel";
  static constexpr std::string_view target = "tensor.numel";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = no_params;
  static constexpr std::tuple<> fields{};

  static constexpr Shape infer_shape(const params&, const Shape&) { return Shape{}; }
  static Dims infer_dims(const params&, const ShapeDims&) { return {}; }
  static DType infer_dtype(const params*, std::span<const DType>) { return DType::int32; }
  static std::optional<ShapeValue> infer_value(const params&, const ShapeDims& x) {
    return ShapeValue{{::tracemod::numel(x.dims)}, {x.shape.numel()}};
  }
  static op_cost cost(const params&, const Shape&, const Shape&) { return {}; }

  static Tensor eager(const params&, const Tensor& x) {
    require_defined(target, "inp", x);
    if (x.numel() > std::numeric_limits<std::int32_t>::max())
      throw value_error(std::string(target) + ": the element count " + std::to_string(x.numel()) + " of " +
                        x.shape().to_string() + " does not fit in int32");
    Tensor y = Tensor::empty(Shape{}, DType::int32, target);
    y.data<std::int32_t>()[0] = static_cast<std::int32_t>(x.numel());
    return y;
  }

  /// ONNX's Size gives int64: cast to tracemod's int32.
  static void onnx_export(onnx_export_context& cx, const params&) { detail::onnx_export_int64_read(cx, "Size"); }
  /// A Size of an input with dynamic dims, as shape_of_fn imports Shape.
  static constexpr std::array onnx_import_types{std::string_view("Size")};
  static void onnx_import(onnx_import_context& cx) { cx.bind(cx.call<numel_fn>({}, cx.tensor(0))); }
};
inline constexpr numel_fn numel{};
TRACEMOD_REGISTER_BUILTIN_OP(numel_fn);

namespace detail {

/// The values [first, last) as a reshape's target (at most Shape::max_rank of them).
template <class It>
int_list to_int_list(It first, It last) {
  int_list l;
  for (; first != last; ++first) l.push_back(static_cast<std::int64_t>(*first));
  return l;
}

/// The factors of a product (x*y*2 gives x, y, 2); any other expression is its own.
inline void factors(const DimExpr& e, std::vector<DimExpr>& out) {
  if (e.kind() == DimExpr::Kind::mul) {
    factors(e.lhs(), out);
    factors(e.rhs(), out);
  } else {
    out.push_back(e);
  }
}

/// The extents in `shape`, the 1-D int32 shape operand of op `target` applied to `x`.
inline std::vector<std::int64_t> shape_operand(std::string_view target, const Tensor& x, const Tensor& shape) {
  require_defined(target, "inp", x);
  require_defined(target, "shape", shape);
  if (shape.dtype() != DType::int32 || shape.shape().rank() != 1)
    throw dtype_error(std::string(target) + ": operand 'shape' must be a 1-D int32 tensor, not " +
                      std::string(dtype_name(shape.dtype())) + " " + shape.shape().to_string());
  const std::int32_t* d = shape.data<std::int32_t>();
  return {d, d + shape.numel()};
}

/// The extent a -1 of a reshape stands for: the input's element count over the target's other
/// extents, with the factors they share cancelled first, so `(N, -1)` of `(N, C, H, W)` gives
/// `C*H*W`, not `N*C*H*W/N`, and `(N*2, -1)` of `(N, 4, 6)` gives 12.
inline DimExpr inferred_extent(const Dims& in, const Dims& others) {
  std::vector<DimExpr> left, divisors;
  for (const DimExpr& d : in) factors(d, left);
  for (const DimExpr& d : others) factors(d, divisors);
  DimExpr divisor = 1;
  for (const DimExpr& d : divisors) {
    const auto same = std::find(left.begin(), left.end(), d);
    if (same != left.end())
      left.erase(same);
    else
      divisor = divisor * d;
  }
  return ::tracemod::numel(left) / divisor;
}

/// What reshape_to and onnx_reshape_to declare alike: a call of x and its shape as a value.
struct reshape_by_value {
  static constexpr call_kind kind = call_kind::function;
  static constexpr bool any_dtype = true;  // a view moves no data, so any dtype passes through
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}, operand{"shape", operand_kind::shape_value}};
  using params = no_params;
  static constexpr std::tuple<> fields{};
};

}  // namespace detail

/// x reshaped to the extents held in `shape`, a 1-D int32 tensor (one extent may be -1, inferred),
/// as F::reshape does with a list. Recording it needs `shape`'s value (a ShapeValue): an int32
/// computed from shapes or a constant; a value known only at run time is a shape_error then.
struct reshape_to_fn : op_base<reshape_to_fn>, detail::reshape_by_value {
  static constexpr std::string_view name = "reshape";
  static constexpr std::string_view target = "tensor.reshape_to";

  static Shape infer_shape(const params&, const Shape& x, const ShapeValue& shape) {
    return reshape_fn::infer_shape({detail::to_int_list(shape.example.begin(), shape.example.end())}, x);
  }
  /// The value's expressions; a -1 is the input's element count over the others.
  static Dims infer_dims(const params&, const ShapeDims& x, const ShapeValue& shape) {
    Dims others;
    for (const DimExpr& d : shape.dims)
      if (!(d.is_constant() && d.value() == -1)) others.push_back(d);
    Dims out;
    for (const DimExpr& d : shape.dims)
      out.push_back(d.is_constant() && d.value() == -1 ? detail::inferred_extent(x.dims, others) : d);
    return out;
  }

  static Tensor eager(const params&, const Tensor& x, const Tensor& shape) {
    const std::vector<std::int64_t> want = detail::shape_operand(target, x, shape);
    return reshape_fn::eager({detail::to_int_list(want.begin(), want.end())}, x);
  }

  /// ONNX's Reshape reads an int64 shape; tracemod's -1 means what ONNX's does. A 0 is a literal zero
  /// extent in tracemod, which Reshape states with allowzero from opset 14 on; before, a 0 at run
  /// time copies the input's extent.
  static void onnx_export(onnx_export_context& cx, const params&) {
    const std::string s = cx.node1("Cast", {cx.input(1).name}, cx.fresh(cx.input(1).name + "_int64"), {{"to", std::int64_t{7}}});
    std::vector<onnx_attribute> attributes;
    if (cx.graph().opset() >= 14) attributes.push_back({"allowzero", std::int64_t{1}});
    cx.node("Reshape", {cx.input(0).name, s}, {cx.output()}, attributes);
  }
};
inline constexpr reshape_to_fn reshape_to{};
TRACEMOD_REGISTER_BUILTIN_OP(reshape_to_fn);

/// reshape_to, except that a 0 in `shape` copies x's extent at that position, as ONNX's Reshape
/// reads its shape with allowzero=0: how import records a Reshape whose shape is computed at run
/// time, so that a 0 known only then still copies.
struct onnx_reshape_to_fn : op_base<onnx_reshape_to_fn>, detail::reshape_by_value {
  static constexpr std::string_view name = "reshape";
  static constexpr std::string_view target = "tensor.onnx_reshape_to";

  /// `shape` with each 0 replaced by x's extent there; a 0 past x's rank is a shape_error.
  template <class E>
  static std::vector<E> copied(const std::vector<std::int64_t>& example, const std::vector<E>& shape,
                               const std::vector<E>& x, const std::string& what) {
    std::vector<E> out(shape);
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (example[i] != 0) continue;
      if (i >= x.size())
        throw shape_error(std::string(target) + ": cannot reshape " + what + " (a 0 at position " + std::to_string(i) +
                          " copies the input's extent there, past its rank)");
      out[i] = x[i];
    }
    return out;
  }
  static ShapeValue resolved(const ShapeValue& shape, const ShapeDims& x) {
    const std::string what = x.shape.to_string() + " to " + ints_repr(shape.example);
    for (std::size_t i = 0; i < shape.dims.size(); ++i)
      if (shape.example[i] == 0 && !shape.dims[i].is_constant())
        throw shape_error(std::string(target) + ": cannot reshape " + what + ": extent " + std::to_string(i) + " is " +
                          shape.dims[i].to_string() + ", 0 in this trace, so whether it copies the input's extent "
                          "depends on the run");
    ShapeValue v;
    v.example = copied(shape.example, shape.example, std::vector<std::int64_t>(x.shape.begin(), x.shape.end()), what);
    v.dims = copied(shape.example, shape.dims, std::vector<DimExpr>(x.dims.begin(), x.dims.end()), what);
    return v;
  }
  static Shape infer_shape(const params& p, const Shape& x, const ShapeValue& shape) {
    return reshape_to_fn::infer_shape(p, x, resolved(shape, ShapeDims{Dims(x.begin(), x.end()), x}));
  }
  static Dims infer_dims(const params& p, const ShapeDims& x, const ShapeValue& shape) {
    return reshape_to_fn::infer_dims(p, x, resolved(shape, x));
  }

  static Tensor eager(const params&, const Tensor& x, const Tensor& shape) {
    const std::vector<std::int64_t> want = detail::shape_operand(target, x, shape);
    const std::vector<std::int64_t> out = copied(want, want, std::vector<std::int64_t>(x.shape().begin(), x.shape().end()),
                                                 x.shape().to_string() + " to " + ints_repr(want));
    return reshape_fn::eager({detail::to_int_list(out.begin(), out.end())}, x);
  }

  /// ONNX's Reshape with allowzero=0 (its default) is this op.
  static void onnx_export(onnx_export_context& cx, const params&) {
    const std::string s = cx.node1("Cast", {cx.input(1).name}, cx.fresh(cx.input(1).name + "_int64"), {{"to", std::int64_t{7}}});
    cx.node("Reshape", {cx.input(0).name, s}, {cx.output()});
  }
};
inline constexpr onnx_reshape_to_fn onnx_reshape_to{};
TRACEMOD_REGISTER_BUILTIN_OP(onnx_reshape_to_fn);

/// x broadcast to the extents held in `shape`, a 1-D int32 tensor (torch's Tensor.expand with the
/// sizes as values): a -1 keeps x's extent on that axis (right-aligned; not on a new leading axis),
/// any other extent must equal x's or x's must be 1. Recorded as reshape_to is: the shape operand's
/// value states the output's dims, so `(size(x, 0), 1, 8)` is `(N, 1, 8)` with a dynamic batch N.
struct expand_to_fn : op_base<expand_to_fn> {
  static constexpr std::string_view name = "expand";
  static constexpr std::string_view target = "tensor.expand_to";
  static constexpr call_kind kind = call_kind::function;
  static constexpr scale_rule scaling = scale_rule::linear;
  static constexpr bool any_dtype = true;  // moves elements: every dtype alike
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}, operand{"shape", operand_kind::shape_value}};
  using params = no_params;
  static constexpr std::tuple<> fields{};

  /// The target with each -1 replaced by x's extent on that axis.
  template <class E>
  static std::vector<E> resolved(const std::vector<E>& shape, const std::vector<E>& x, const std::string& what) {
    if (shape.size() < x.size() || shape.size() > Shape::max_rank)
      throw shape_error(std::string(target) + ": cannot expand " + what + " (the target's rank must be at least the "
                        "input's and at most " + std::to_string(Shape::max_rank) + ")");
    const std::size_t lead = shape.size() - x.size();
    std::vector<E> out(shape);
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (!(shape[i] == E(-1))) continue;
      if (i < lead) throw shape_error(std::string(target) + ": cannot expand " + what + " (-1 on a new leading axis)");
      out[i] = x[i - lead];
    }
    return out;
  }
  static Shape infer_shape(const params&, const Shape& x, const ShapeValue& shape) {
    const std::vector<std::int64_t> in(x.begin(), x.end());
    const std::string what = x.to_string() + " to " + ints_repr(shape.example);
    const std::vector<std::int64_t> out = resolved(shape.example, in, what);
    return broadcast_to_fn::infer_shape({detail::to_int_list(out.begin(), out.end())}, x);
  }
  static Dims infer_dims(const params&, const ShapeDims& x, const ShapeValue& shape) {
    const std::vector<DimExpr> in(x.dims.begin(), x.dims.end());
    const std::vector<DimExpr> want(shape.dims.begin(), shape.dims.end());
    const std::vector<DimExpr> out = resolved(want, in, x.shape.to_string());
    return Dims(out.begin(), out.end());
  }

  static Tensor eager(const params&, const Tensor& x, const Tensor& shape) {
    const std::vector<std::int64_t> want = detail::shape_operand(target, x, shape);
    const std::vector<std::int64_t> out = resolved(want, std::vector<std::int64_t>(x.shape().begin(), x.shape().end()),
                                                   x.shape().to_string() + " to " + ints_repr(want));
    return broadcast_to_fn::eager({detail::to_int_list(out.begin(), out.end())}, x);
  }

  /// ONNX's Expand reads an int64 shape and broadcasts both ways, so a 1 keeps the input's extent:
  /// each -1 becomes 1.
  static void onnx_export(onnx_export_context& cx, const params&) {
    const std::string s = cx.node1("Cast", {cx.input(1).name}, cx.fresh(cx.input(1).name + "_int64"), {{"to", std::int64_t{7}}});
    const std::string keep = cx.node1("Equal", {s, cx.graph().ints({-1}, "minus_one")}, cx.fresh(s + "_keep"));
    const std::string resolved = cx.node1("Where", {keep, cx.graph().ints({1}, "one"), s}, cx.fresh(s + "_resolved"));
    cx.node("Expand", {cx.input(0).name, resolved}, {cx.output()});
  }
};
inline constexpr expand_to_fn expand_to{};
TRACEMOD_REGISTER_BUILTIN_OP(expand_to_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
