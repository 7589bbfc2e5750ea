// Reductions over axes: sum, mean, max and min (MegEngine's F.sum, F.mean, F.max, F.min), prod and
// logsumexp (MegEngine's F.prod, F.logsumexp), and sum_square, norm_l1, norm_l2 and log_sum (ONNX's
// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum). `axis` lists the reduced axes (negative ones
// count from the end); an empty list, the default, reduces every axis, as MegEngine's axis=None.
// keepdims keeps each reduced axis with extent 1. All but max and min accumulate in double; an empty
// reduction is 0 for the sums and norms, 1 for prod, -inf for log_sum and logsumexp and NaN for mean,
// and has no max or min (a shape_error). NaN propagates through max and min, as in PyTorch. ONNX:
// ReduceSum (axes an input, opset 13 on) and the others (axes an attribute up to opset 17, an input
// from 18 on), both ways; Mean (the elementwise mean of the inputs) imports as their sum divided by
// their count.
#pragma once

#include <tracemod/functional/elementwise.hpp>
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

/// Sums of map(x) into acc (double), acc sized and zeroed by the caller.
template <class Map>
void reduce_sum_of(const float* x, double* acc, const Shape& s, const axis_mask& reduced, Map map) {
  for_each_reduce_run(s, reduced, [&](std::size_t in, std::size_t out, std::size_t n, bool folds) {
    const float* p = x + in;
    if (folds) {
      double a0 = 0, a1 = 0;  // two chains: the adds of one run overlap
      std::size_t k = 0;
      for (; k + 1 < n; k += 2) {
        a0 += map(static_cast<double>(p[k]));
        a1 += map(static_cast<double>(p[k + 1]));
      }
      if (k < n) a0 += map(static_cast<double>(p[k]));
      acc[out] += a0 + a1;
    } else {
      for (std::size_t k = 0; k < n; ++k) acc[out + k] += map(static_cast<double>(p[k]));
    }
  });
}

/// Sums of x into acc (double), acc sized and zeroed by the caller.
inline void reduce_sum(const float* x, double* acc, const Shape& s, const axis_mask& reduced) {
  reduce_sum_of(x, acc, s, reduced, [](double v) { return v; });
}

/// Sums of exp(x - shift[out]) into acc (double), acc sized and zeroed by the caller: the sums of a
/// log-sum-exp whose shifts are the maxima.
inline void reduce_sum_exp(const float* x, const float* shift, double* acc, const Shape& s, const axis_mask& reduced) {
  for_each_reduce_run(s, reduced, [&](std::size_t in, std::size_t out, std::size_t n, bool folds) {
    const float* p = x + in;
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t o = folds ? out : out + k;
      acc[o] += std::exp(static_cast<double>(p[k]) - static_cast<double>(shift[o]));
    }
  });
}

/// Products of x into acc (double), acc sized and filled with 1 by the caller.
inline void reduce_prod(const float* x, double* acc, const Shape& s, const axis_mask& reduced) {
  for_each_reduce_run(s, reduced, [&](std::size_t in, std::size_t out, std::size_t n, bool folds) {
    const float* p = x + in;
    for (std::size_t k = 0; k < n; ++k) acc[folds ? out : out + k] *= static_cast<double>(p[k]);
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

/// sum_square, l1, l2, log_sum and log_sum_exp are ONNX's ReduceSumSquare (the sum of x * x),
/// ReduceL1 (of |x|), ReduceL2 (the square root of the sum of squares), ReduceLogSum (the log of the
/// sum) and ReduceLogSumExp (log sum exp(x), shifted by the maximum so that exp cannot overflow).
enum class reduce_kind : std::uint8_t { sum, mean, max, min, prod, sum_square, l1, l2, log_sum, log_sum_exp };

/// axis: the reduced axes, empty for all of them (MegEngine's axis=None).
struct reduce_params {
  int_list axis{};
  bool keepdims = false;
};

namespace detail {

struct reduce_names {
  std::string_view name, target, onnx;
  scale_rule scaling;  // how the reduction of k*x relates to k times the reduction of x
};
inline constexpr std::array<reduce_names, 10> reduce_table{{
    {"sum", "math.sum", "ReduceSum", scale_rule::linear},
    {"mean", "math.mean", "ReduceMean", scale_rule::linear},
    {"max", "math.max", "ReduceMax", scale_rule::positive},
    {"min", "math.min", "ReduceMin", scale_rule::positive},
    {"prod", "math.prod", "ReduceProd", scale_rule::none},
    {"sum_square", "math.sum_square", "ReduceSumSquare", scale_rule::none},
    {"norm_l1", "math.norm_l1", "ReduceL1", scale_rule::positive},
    {"norm_l2", "math.norm_l2", "ReduceL2", scale_rule::positive},
    {"log_sum", "math.log_sum", "ReduceLogSum", scale_rule::none},
    {"logsumexp", "math.logsumexp", "ReduceLogSumExp", scale_rule::none},
}};

}  // namespace detail

/// One reduction: F::sum, F::mean, F::max, F::min, F::prod, F::sum_square, F::norm_l1, F::norm_l2,
/// F::log_sum and F::logsumexp are its kinds, each an op of its own.
template <reduce_kind R>
struct reduce_fn : op_base<reduce_fn<R>> {
  static constexpr std::string_view name = detail::reduce_table[static_cast<std::size_t>(R)].name;
  static constexpr std::string_view target = detail::reduce_table[static_cast<std::size_t>(R)].target;
  static constexpr std::string_view onnx_type = detail::reduce_table[static_cast<std::size_t>(R)].onnx;
  /// A sum or mean of k*x is k times it; the max, min and norms only for k > 0.
  static constexpr scale_rule scaling = detail::reduce_table[static_cast<std::size_t>(R)].scaling;
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
  /// One operation per input element (two for sum_square, l1, l2; four for logsumexp's max, subtraction,
  /// exp and sum), and for mean, l2, log_sum and logsumexp one more per output element.
  static constexpr op_cost cost(const params&, const Shape& out, const Shape& x) {
    constexpr std::int64_t per_in = R == reduce_kind::log_sum_exp ? 4
                                    : R == reduce_kind::sum_square || R == reduce_kind::l1 || R == reduce_kind::l2 ? 2
                                                                                                                   : 1;
    constexpr bool per_out = R == reduce_kind::mean || R == reduce_kind::l2 || R == reduce_kind::log_sum ||
                             R == reduce_kind::log_sum_exp;
    return flop_cost(per_in * x.numel() + (per_out ? out.numel() : 0));
  }

  static Tensor eager(const params& p, const Tensor& x) {
    require_float32(target, "inp", x);
    const Shape& s = x.shape();
    const kernels::axis_mask mask = reduced_axes(p, s);
    Tensor y = Tensor::empty(infer_shape(p, s), DType::float32, target);
    const auto n = static_cast<std::size_t>(y.numel());
    float* out = y.template data<float>();
    if constexpr (R == reduce_kind::max || R == reduce_kind::min) {
      constexpr bool take_min = R == reduce_kind::min;
      const float start = take_min ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
      for (std::size_t i = 0; i < n; ++i) out[i] = start;
      kernels::reduce_extremum(x.data<float>(), out, s, mask, take_min);
    } else if constexpr (R == reduce_kind::log_sum_exp) {
      std::vector<float> top(n, -std::numeric_limits<float>::infinity());
      kernels::reduce_extremum(x.data<float>(), top.data(), s, mask, false);
      std::vector<double> acc(n, 0.0);
      kernels::reduce_sum_exp(x.data<float>(), top.data(), acc.data(), s, mask);
      for (std::size_t i = 0; i < n; ++i)  // an infinite maximum (or none, -inf) is the result itself
        out[i] = std::isinf(top[i]) ? top[i] : static_cast<float>(static_cast<double>(top[i]) + std::log(acc[i]));
    } else if constexpr (R == reduce_kind::prod) {
      std::vector<double> acc(n, 1.0);
      kernels::reduce_prod(x.data<float>(), acc.data(), s, mask);
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(acc[i]);
    } else {
      std::vector<double> acc(n, 0.0);
      if constexpr (R == reduce_kind::l1)
        kernels::reduce_sum_of(x.data<float>(), acc.data(), s, mask, [](double v) { return std::abs(v); });
      else if constexpr (R == reduce_kind::sum_square || R == reduce_kind::l2)
        kernels::reduce_sum_of(x.data<float>(), acc.data(), s, mask, [](double v) { return v * v; });
      else
        kernels::reduce_sum(x.data<float>(), acc.data(), s, mask);
      const double count = R == reduce_kind::mean ? static_cast<double>(reduced_count(p, s)) : 1.0;
      for (std::size_t i = 0; i < n; ++i) {  // a mean's 0 / 0 is NaN, a log_sum's log 0 is -inf
        double v = acc[i] / count;
        if constexpr (R == reduce_kind::l2) v = std::sqrt(v);
        if constexpr (R == reduce_kind::log_sum) v = std::log(v);
        out[i] = static_cast<float>(v);
      }
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
  /// The Reduce node; for mean also Mean, the elementwise mean of its inputs (with broadcasting).
  static std::vector<onnx_import_rule> onnx_imports() {
    std::vector<onnx_import_rule> rules{{std::string(onnx_type), {"axes", "keepdims", "noop_with_empty_axes"}, {1}, &onnx_import}};
    if constexpr (R == reduce_kind::mean) rules.push_back({"Mean", {}, {}, &onnx_import_mean});
    return rules;
  }
  /// Mean(x0, x1, ...) as (x0 + x1 + ...) / n; one input is that input.
  static void onnx_import_mean(onnx_import_context& cx) {
    onnx_value acc = cx.tensor(0);
    for (int i = 1; i < cx.input_count(); ++i) acc = cx.call<add_fn>({}, acc, cx.tensor(i));
    if (cx.input_count() == 1) return cx.bind(acc, false);
    cx.bind(cx.call<div_fn>({}, acc, Value(static_cast<double>(cx.input_count()))));
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
using prod_fn = reduce_fn<reduce_kind::prod>;
using sum_square_fn = reduce_fn<reduce_kind::sum_square>;
using norm_l1_fn = reduce_fn<reduce_kind::l1>;
using norm_l2_fn = reduce_fn<reduce_kind::l2>;
using log_sum_fn = reduce_fn<reduce_kind::log_sum>;
using logsumexp_fn = reduce_fn<reduce_kind::log_sum_exp>;

inline constexpr sum_fn sum{};
inline constexpr mean_fn mean{};
inline constexpr max_fn max{};
inline constexpr min_fn min{};
inline constexpr prod_fn prod{};
inline constexpr sum_square_fn sum_square{};
inline constexpr norm_l1_fn norm_l1{};
inline constexpr norm_l2_fn norm_l2{};
inline constexpr log_sum_fn log_sum{};
inline constexpr logsumexp_fn logsumexp{};
TRACEMOD_REGISTER_BUILTIN_OP(sum_fn);
TRACEMOD_REGISTER_BUILTIN_OP(mean_fn);
TRACEMOD_REGISTER_BUILTIN_OP(max_fn);
TRACEMOD_REGISTER_BUILTIN_OP(min_fn);
TRACEMOD_REGISTER_BUILTIN_OP(prod_fn);
TRACEMOD_REGISTER_BUILTIN_OP(sum_square_fn);
TRACEMOD_REGISTER_BUILTIN_OP(norm_l1_fn);
TRACEMOD_REGISTER_BUILTIN_OP(norm_l2_fn);
TRACEMOD_REGISTER_BUILTIN_OP(log_sum_fn);
TRACEMOD_REGISTER_BUILTIN_OP(logsumexp_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
