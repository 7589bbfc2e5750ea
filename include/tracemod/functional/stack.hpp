// F::stack: joins tensors of one shape along a new axis (PyTorch's torch.stack, MegEngine's
// F.stack). F::tensor_from_list(items...) builds a 1-D tensor from numbers and rank-0 tensors, some
// of them traced values (MegEngine's `Tensor([1, t, 1])`): it is F::stack of the items, numbers
// made rank-0 tensors (int32 in a list of int32 tensors, float32 otherwise), so a traced list is one `tensor.stack` call whose number items are
// Constants.
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/layout.hpp>

#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod::functional {

struct stack_params {
  std::int64_t axis = 0;
};

/// Joins tensors of equal shape along a new axis `axis` (in [-rank-1, rank]).
struct stack_fn : op_base<stack_fn> {
  static constexpr std::string_view name = "stack";
  static constexpr std::string_view target = "tensor.stack";
  static constexpr scale_rule scaling = scale_rule::linear;  // moves elements, never changes them
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inps", operand_kind::tensor_list}};
  using params = stack_params;
  static constexpr std::tuple fields{positional("axis", &params::axis)};

  /// Each input's shape with an extent 1 at the new axis: stacking is concatenating those.
  static std::vector<Shape> joined_shapes(const params& p, std::span<const Shape> shapes, std::size_t& axis) {
    if (shapes.empty()) throw value_error(std::string(target) + ": needs at least one input");
    const Shape& first = shapes[0];
    axis = normalize_axis(p.axis, first.rank() + 1, target);
    std::vector<Shape> joined;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      if (shapes[i] != first)
        throw shape_error(std::string(target) + ": input " + std::to_string(i) + " has shape " + shapes[i].to_string() +
                          " but input 0 has " + first.to_string() + "; stacked tensors must have one shape");
      Shape s;
      for (std::size_t d = 0; d <= first.rank(); ++d) s.push_back(d == axis ? 1 : first[d < axis ? d : d - 1]);
      joined.push_back(s);
    }
    return joined;
  }

  static Shape infer_shape(const params& p, std::span<const Shape> shapes) {
    std::size_t axis = 0;
    const std::vector<Shape> joined = joined_shapes(p, shapes, axis);
    return kernels::concat_shape(joined.data(), joined.size(), axis, target);
  }
  /// The first input's symbolic shape with the stacked count inserted at the new axis (the inputs
  /// share one shape; infer_shape checked their example shapes, the kernel checks at run time).
  static Dims infer_dims(const params& p, std::span<const ShapeDims> inps) {
    std::vector<Shape> shapes;
    for (const ShapeDims& x : inps) shapes.push_back(x.shape);
    std::size_t axis = 0;
    (void)joined_shapes(p, shapes, axis);
    Dims out = inps[0].dims;
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(axis), DimExpr(static_cast<std::int64_t>(inps.size())));
    return out;
  }
  /// Of rank-0 shape values stacked along axis 0 (a shape built from extents, core/dim.hpp), their
  /// elements in order.
  static std::optional<ShapeValue> infer_value(const params&, std::span<const ShapeDims> inps) {
    ShapeValue v;
    for (const ShapeDims& x : inps) {
      if (x.value == nullptr || x.shape.rank() != 0) return std::nullopt;
      v.dims.push_back(x.value->dims.at(0));
      v.example.push_back(x.value->example.at(0));
    }
    if (inps.empty()) return std::nullopt;
    return v;  // rank-0 items: the axis is 0 or -1 (infer_shape checked it), both give this order
  }

  /// float32, or int32 (shapes built as values); one dtype for all inputs.
  static constexpr bool any_dtype = true;
  static Tensor eager(const params& p, std::span<const Tensor> inps) {
    const std::vector<Shape> shapes = joined_shapes_of(target, inps);
    std::size_t axis = 0;
    const std::vector<Shape> joined = joined_shapes(p, shapes, axis);
    const DType dtype = inps.empty() ? DType::float32 : inps[0].dtype();
    Tensor y = Tensor::empty(kernels::concat_shape(joined.data(), joined.size(), axis, target), dtype, target);
    const auto join = [&]<class T>(T*) {
      std::vector<const T*> data;
      for (const Tensor& t : inps) data.push_back(t.data<T>());
      kernels::concat(data.data(), joined.data(), joined.size(), axis, y.data<T>());
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

  /// ONNX has no stack: each input gains the axis (Unsqueeze), then Concat joins them.
  static void onnx_export(onnx_export_context& cx, const params& p) {
    const std::size_t axis = normalize_axis(p.axis, cx.output_shape().rank(), cx.call().where);
    const std::string axes = cx.graph().ints({static_cast<std::int64_t>(axis)}, "axes");
    std::vector<std::string> in;
    for (const onnx_operand& o : cx.input(0).list)
      in.push_back(cx.node1("Unsqueeze", {o.name, axes}, cx.fresh(o.name + "_unsqueezed")));
    cx.node("Concat", in, {cx.output()}, {{"axis", static_cast<std::int64_t>(axis)}});
  }

  /// A braced list of tensors is a vector: F::stack({a, b}, 1).
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
inline constexpr stack_fn stack{};
TRACEMOD_REGISTER_BUILTIN_OP(stack_fn);

namespace detail {

/// The numbers already made tensors by one tensor_from_list call: equal numbers share one tensor,
/// so a traced list records one Constant per distinct number.
struct list_numbers {
  DType dtype = DType::float32;  // int32 when the list holds an int32 tensor (a shape built as a value)
  std::vector<std::pair<double, Tensor>> made;
  Tensor operator()(double v) {
    for (const auto& [value, t] : made)
      if (value == v) return t;
    Tensor t = Tensor::empty(Shape{}, dtype, stack_fn::target);
    if (dtype == DType::int32) {
      if (v != std::trunc(v) || v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
        throw value_error(std::string(stack_fn::target) + ": the number " + std::to_string(v) +
                          " of a list holding int32 tensors is not an int32");
      t.data<std::int32_t>()[0] = static_cast<std::int32_t>(v);
    } else {
      t.data<float>()[0] = static_cast<float>(v);
    }
    made.emplace_back(v, t);
    return t;
  }
};

/// int32 when some tensor item is (a list building a shape from extents), else float32.
template <class... I>
DType list_dtype(const I&... items) {
  bool int32 = false;
  const auto visit = [&]<class T>(const T& item) {
    if constexpr (requires { { item.dtype() } -> std::convertible_to<DType>; }) int32 = int32 || item.dtype() == DType::int32;
  };
  (visit(items), ...);
  return int32 ? DType::int32 : DType::float32;
}

template <class I>
using list_item_t = std::conditional_t<scalar_operand<I>, Tensor, I>;

template <class I>
list_item_t<I> list_item(list_numbers& numbers, const I& item) {
  if constexpr (scalar_operand<I>)
    return numbers(static_cast<double>(item));
  else
    return item;
}

}  // namespace detail

/// A 1-D tensor of the items, in order: numbers and rank-0 tensors (eager tensors, or traced values
/// while tracing); float32, or int32 when an item is an int32 tensor, so
/// tensor_from_list(1, F::size(x, 0), 1) is MegEngine's Tensor([1, n, 1]) built from an extent.
template <class... I>
  requires(sizeof...(I) > 0)
auto tensor_from_list(const I&... items) {
  detail::list_numbers numbers{detail::list_dtype(items...), {}};
  // A braced list converts the items left to right.
  const std::tuple<detail::list_item_t<I>...> list{detail::list_item(numbers, items)...};
  return stack(list, stack_params{0});
}

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
