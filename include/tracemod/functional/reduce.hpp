// Reductions over axes: sum, mean, max and min (MegEngine's F.sum, F.mean, F.max, F.min). `axis`
// lists the reduced axes (negative ones count from the end); an empty list, the default, reduces
// every axis, as MegEngine's axis=None. keepdims keeps each reduced axis with extent 1. sum and mean
// accumulate in double; an empty reduction is 0 for sum and NaN for mean, and has no max or min
// (a shape_error). NaN propagates through max and min, as in PyTorch. ONNX: ReduceSum (axes an
// input, opset 13 on), ReduceMean, ReduceMax and ReduceMin (axes an attribute up to opset 17, an
// input from 18 on), both ways.
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace tracemod::kernels {

/// Which input axes a reduction folds away.
using axis_mask = std::array<bool, Shape::max_rank>;

/// Walks a contiguous input of shape `x` once, in order, as runs of its innermost axes: calls
/// run(in_offset, out_offset, length, reduced) for each run of `length` consecutive elements, where
/// `reduced` says whether the run folds into the one output element at out_offset or maps onto the
/// `length` consecutive output elements from out_offset. Adjacent axes reduced alike (and axes of
/// extent 1) merge first, so the runs are as long as the layout allows. An empty input has no runs.
template <class Run>
void for_each_reduce_run(const Shape& x, const axis_mask& reduced, Run&& run) {
  std::array<std::size_t, Shape::max_rank> extent{}, out_stride{}, index{};
  axis_mask group_reduced{};
  std::size_t groups = 0;
  for (std::size_t i = 0; i < x.rank(); ++i) {
    const auto e = static_cast<std::size_t>(x[i]);
    if (e == 0) return;
    if (e == 1) continue;
    if (groups > 0 && group_reduced[groups - 1] == reduced[i]) {
      extent[groups - 1] *= e;
    } else {
      extent[groups] = e;
      group_reduced[groups++] = reduced[i];
    }
  }
  if (groups == 0) return run(std::size_t{0}, std::size_t{0}, std::size_t{1}, true);  // one element
  for (std::size_t g = groups, s = 1; g-- > 0;) {
    out_stride[g] = group_reduced[g] ? 0 : s;
    if (!group_reduced[g]) s *= extent[g];
  }
  const std::size_t length = extent[groups - 1];
  const bool inner_reduced = group_reduced[groups - 1];
  std::size_t runs = 1;
  for (std::size_t g = 0; g + 1 < groups; ++g) runs *= extent[g];
  std::size_t in = 0, out = 0;
  for (std::size_t r = 0; r < runs; ++r, in += length) {
    run(in, out, length, inner_reduced);
    for (std::size_t g = groups - 1; g-- > 0;) {  // the odometer over the outer groups
      out += out_stride[g];
      if (++index[g] < extent[g]) break;
      out -= out_stride[g] * extent[g];
      index[g] = 0;
    }
  }
}

/// Sums of x into acc (double), acc sized and zeroed by the caller.
inline void reduce_sum(const float* x, double* acc, const Shape& s, const axis_mask& reduced) {
  for_each_reduce_run(s, reduced, [&](std::size_t in, std::size_t out, std::size_t n, bool folds) {
    const float* p = x + in;
    if (folds) {
      double a0 = 0, a1 = 0;  // two chains: the adds of one run overlap
      std::size_t k = 0;
      for (; k + 1 < n; k += 2) {
        a0 += static_cast<double>(p[k]);
        a1 += static_cast<double>(p[k + 1]);
      }
      if (k < n) a0 += static_cast<double>(p[k]);
      acc[out] += a0 + a1;
    } else {
      for (std::size_t k = 0; k < n; ++k) acc[out + k] += static_cast<double>(p[k]);
    }
  });
}

/// max (or with `take_min`, min) of x into y, y filled by the caller with -inf (+inf); NaN wins.
inline void reduce_extremum(const float* x, float* y, const Shape& s, const axis_mask& reduced, bool take_min) {
  const auto pick = [take_min](float m, float v) {
    return (take_min ? v < m : v > m) || std::isnan(v) ? v : m;
  };
  for_each_reduce_run(s, reduced, [&](std::size_t in, std::size_t out, std::size_t n, bool folds) {
    const float* p = x + in;
    if (folds) {
      float m = y[out];
      for (std::size_t k = 0; k < n; ++k) m = pick(m, p[k]);
      y[out] = m;
    } else {
      for (std::size_t k = 0; k < n; ++k) y[out + k] = pick(y[out + k], p[k]);
    }
  });
}

}  // namespace tracemod::kernels

namespace tracemod::functional {

enum class reduce_kind : std::uint8_t { sum, mean, max, min };

/// axis: the reduced axes, empty for all of them (MegEngine's axis=None).
struct reduce_params {
  int_list axis{};
  bool keepdims = false;
};

namespace detail {

struct reduce_names {
  std::string_view name, target, onnx;
};
inline constexpr std::array<reduce_names, 4> reduce_table{{{"sum", "math.sum", "ReduceSum"},
                                                           {"mean", "math.mean", "ReduceMean"},
                                                           {"max", "math.max", "ReduceMax"},
                                                           {"min", "math.min", "ReduceMin"}}};

}  // namespace detail

/// One reduction: F::sum, F::mean, F::max and F::min are its four kinds, each an op of its own.
template <reduce_kind R>
struct reduce_fn : op_base<reduce_fn<R>> {
  static constexpr std::string_view name = detail::reduce_table[static_cast<std::size_t>(R)].name;
  static constexpr std::string_view target = detail::reduce_table[static_cast<std::size_t>(R)].target;
  static constexpr std::string_view onnx_type = detail::reduce_table[static_cast<std::size_t>(R)].onnx;
  /// A sum or mean of k*x is k times it; the max and min only for k > 0.
  static constexpr scale_rule scaling =
      R == reduce_kind::sum || R == reduce_kind::mean ? scale_rule::linear : scale_rule::positive;
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = reduce_params;
  static constexpr std::tuple fields{positional("axis", &params::axis), positional("keepdims", &params::keepdims)};

  /// The reduced axes of x; value_error for an axis out of range or listed twice.
  static constexpr kernels::axis_mask reduced_axes(const params& p, const Shape& x) {
    kernels::axis_mask mask{};
    const auto rank = static_cast<std::int64_t>(x.rank());
    if (p.axis.size() == 0) {
      for (std::size_t i = 0; i < x.rank(); ++i) mask[i] = true;
      return mask;
    }
    for (std::int64_t a : p.axis) {
      if (a < -rank || a >= rank)
        throw value_error(std::string(target) + ": axis " + std::to_string(a) + " of axis=" + repr(p.axis) +
                          " is out of range for an input of shape " + x.to_string());
      const auto i = static_cast<std::size_t>(a < 0 ? a + rank : a);
      if (mask[i])
        throw value_error(std::string(target) + ": axis=" + repr(p.axis) + " names axis " + std::to_string(i) +
                          " more than once (input of shape " + x.to_string() + ")");
      mask[i] = true;
    }
    return mask;
  }
  /// The reduced element count of each output element.
  static constexpr std::int64_t reduced_count(const params& p, const Shape& x) {
    const kernels::axis_mask mask = reduced_axes(p, x);
    std::int64_t n = 1;
    for (std::size_t i = 0; i < x.rank(); ++i)
      if (mask[i]) n *= x[i];
    return n;
  }

  static constexpr Shape infer_shape(const params& p, const Shape& x) {
    const kernels::axis_mask mask = reduced_axes(p, x);
    Shape out;
    for (std::size_t i = 0; i < x.rank(); ++i) {
      if (!mask[i])
        out.push_back(x[i]);
      else if (p.keepdims)
        out.push_back(1);
    }
    if constexpr (R == reduce_kind::max || R == reduce_kind::min) {
      if (reduced_count(p, x) == 0 && out.numel() > 0)
        throw shape_error(std::string(target) + ": axis=" + repr(p.axis) + " of an input of shape " + x.to_string() +
                          " reduces an empty set, which has no " + std::string(name) + "imum");
    }
    return out;
  }
  static Dims infer_dims(const params& p, const ShapeDims& x) {
    const kernels::axis_mask mask = reduced_axes(p, x.shape);
    Dims out;
    for (std::size_t i = 0; i < x.dims.size(); ++i) {
      if (!mask[i])
        out.push_back(x.dims[i]);
      else if (p.keepdims)
        out.emplace_back(std::int64_t{1});
    }
    return out;
  }
  /// One operation per input element, and for mean one division per output element.
  static constexpr op_cost cost(const params&, const Shape& out, const Shape& x) {
    return flop_cost(x.numel() + (R == reduce_kind::mean ? out.numel() : 0));
  }

  static Tensor eager(const params& p, const Tensor& x) {
    require_float32(target, "inp", x);
    const Shape& s = x.shape();
    const kernels::axis_mask mask = reduced_axes(p, s);
    Tensor y = Tensor::empty(infer_shape(p, s), DType::float32, target);
    const auto n = static_cast<std::size_t>(y.numel());
    float* out = y.template data<float>();
    if constexpr (R == reduce_kind::sum || R == reduce_kind::mean) {
      std::vector<double> acc(n, 0.0);
      kernels::reduce_sum(x.data<float>(), acc.data(), s, mask);
      const double count = R == reduce_kind::mean ? static_cast<double>(reduced_count(p, s)) : 1.0;
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(acc[i] / count);  // 0 / 0 is NaN
    } else {
      constexpr bool take_min = R == reduce_kind::min;
      const float start = take_min ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
      for (std::size_t i = 0; i < n; ++i) out[i] = start;
      kernels::reduce_extremum(x.data<float>(), out, s, mask, take_min);
    }
    return y;
  }

  /// The axes written out normalised; an empty list reduces all axes, so it is left out.
  static void onnx_export(onnx_export_context& cx, const params& p) {
    const Shape& x = cx.input(0).shape;
    const kernels::axis_mask mask = reduced_axes(p, x);
    std::vector<std::int64_t> axes;
    if (p.axis.size() != 0)
      for (std::size_t i = 0; i < x.rank(); ++i)
        if (mask[i]) axes.push_back(static_cast<std::int64_t>(i));
    std::vector<onnx_attribute> attributes{{"keepdims", std::int64_t{p.keepdims ? 1 : 0}}};
    std::vector<std::string> inputs{cx.input(0).name};
    if constexpr (R == reduce_kind::sum) {  // the exporter writes opsets 13 to 17: axes is an input
      if (!axes.empty()) inputs.push_back(cx.graph().ints(axes, "axes"));
    } else {  // ... and an attribute of the other reductions
      if (!axes.empty()) attributes.push_back({"axes", axes});
    }
    cx.node(std::string(onnx_type), inputs, {cx.output()}, attributes);
  }
  static std::vector<onnx_import_rule> onnx_imports() {
    return {{std::string(onnx_type), {"axes", "keepdims", "noop_with_empty_axes"}, {1}, &onnx_import}};
  }
  /// axes is an input from opset 13 on for ReduceSum and from 18 on for the others, an attribute
  /// before; keepdims defaults to 1; no axes reduce all of them unless noop_with_empty_axes is set.
  static void onnx_import(onnx_import_context& cx) {
    const onnx_value x = cx.tensor(0);
    const std::int64_t input_from = R == reduce_kind::sum ? 13 : 18;
    std::vector<std::int64_t> axes;
    if (cx.opset() >= input_from) {
      if (cx.has_attr("axes"))
        cx.unsupported("attribute axes (an input from opset " + std::to_string(input_from) + " on)");
      if (cx.has_input(1)) axes = cx.integers(1, "axes");
    } else {
      axes = cx.attr_ints("axes");
    }
    if (axes.empty() && cx.attr_int("noop_with_empty_axes", 0) != 0) return cx.bind(x, false);  // the identity
    if (axes.size() > int_list::max_size) cx.unsupported("axes=" + ints_repr(axes) + " (more axes than any tensor has)");
    int_list axis;
    for (std::int64_t a : axes) axis.push_back(a);
    cx.bind(cx.call<reduce_fn>({axis, cx.attr_int("keepdims", 1) != 0}, x));
  }
};

using sum_fn = reduce_fn<reduce_kind::sum>;
using mean_fn = reduce_fn<reduce_kind::mean>;
using max_fn = reduce_fn<reduce_kind::max>;
using min_fn = reduce_fn<reduce_kind::min>;

inline constexpr sum_fn sum{};
inline constexpr mean_fn mean{};
inline constexpr max_fn max{};
inline constexpr min_fn min{};
TRACEMOD_REGISTER_BUILTIN_OP(sum_fn);
TRACEMOD_REGISTER_BUILTIN_OP(mean_fn);
TRACEMOD_REGISTER_BUILTIN_OP(max_fn);
TRACEMOD_REGISTER_BUILTIN_OP(min_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
