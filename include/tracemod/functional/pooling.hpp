// 2-D pooling over NCHW tensors: max_pool2d, avg_pool2d, adaptive_avg_pool2d (PyTorch semantics).
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/pooling.hpp>

#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace tracemod::functional {

namespace detail {

constexpr void require_nchw(std::string_view op, const Shape& x) {
  if (x.rank() != 4) throw shape_error(std::string(op) + ": input " + x.to_string() + " must be 4-D (N, C, H, W)");
}

inline kernels::pool2d_geometry pool_geometry(const Shape& x, pair2 kernel, const std::optional<pair2>& stride,
                                              pair2 padding) {
  kernels::pool2d_geometry g;
  g.n = x[0];
  g.c = x[1];
  g.h = x[2];
  g.w = x[3];
  g.kernel_h = kernel.h;
  g.kernel_w = kernel.w;
  const pair2 st = stride.value_or(kernel);  // PyTorch: stride=None means stride = kernel_size
  g.stride_h = st.h;
  g.stride_w = st.w;
  g.pad_h = padding.h;
  g.pad_w = padding.w;
  return g;
}

inline std::vector<std::int64_t> onnx_hw(pair2 p) { return {p.h, p.w}; }
inline std::vector<std::int64_t> onnx_pads(pair2 p) { return {p.h, p.w, p.h, p.w}; }

}  // namespace detail

/// What max_pool2d and avg_pool2d share: one NCHW input, an (N, C, out_h, out_w) output from the
/// geometry Derived::geometry(params, input shape) computes, and Derived::run, its kernel.
template <class Derived>
struct window_pool_op : op_base<Derived> {
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};

  template <class Params>
  static Shape infer_shape(const Params& p, const Shape& x) {
    const auto g = Derived::geometry(p, x);
    return Shape{g.n, g.c, g.out_h(), g.out_w()};
  }
  /// (N, C, window extents of H and W); ceil_mode rounds up with a correction no DimExpr states, so
  /// it needs static spatial extents.
  template <class Params>
  static Dims infer_dims(const Params& p, const ShapeDims& x) {
    const auto g = Derived::geometry(p, x.shape);
    const auto extent = [&](std::size_t axis, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                            std::int64_t dilation, std::int64_t traced) -> DimExpr {
      if (x.dims[axis].is_constant()) return traced;
      if (g.ceil_mode)
        throw shape_error(std::string(Derived::target) + ": ceil_mode=True needs a static extent on axis " +
                          std::to_string(axis) + ", but the input is " + to_string(x.dims));
      return window_extent(x.dims[axis], kernel, stride, pad, dilation);
    };
    return {x.dims[0], x.dims[1], extent(2, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h, g.out_h()),
            extent(3, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w, g.out_w())};
  }
  /// One operation (a comparison or an add) per window element of each output element.
  template <class Params>
  static op_cost cost(const Params& p, const Shape& out, const Shape& x) {
    const auto g = Derived::geometry(p, x);
    return flop_cost(out.numel() * g.kernel_h * g.kernel_w);
  }
  template <class Params>
  static Tensor eager(const Params& p, const Tensor& x) {
    require_float32(Derived::target, "inp", x);
    const auto g = Derived::geometry(p, x.shape());
    Tensor y = Tensor::empty(Shape{g.n, g.c, g.out_h(), g.out_w()}, DType::float32, Derived::target);
    Derived::run(g, x.data<float>(), y.data<float>());
    return y;
  }
};

struct max_pool2d_params {
  pair2 kernel_size{1};
  std::optional<pair2> stride{};
  pair2 padding{0};
  pair2 dilation{1};
  bool ceil_mode = false;
};

struct max_pool2d_fn : window_pool_op<max_pool2d_fn> {
  static constexpr std::string_view name = "max_pool2d";
  static constexpr std::string_view target = "nn.max_pool2d";
  static constexpr scale_rule scaling = scale_rule::positive;  // max(k*a, k*b) = k*max(a, b) for k > 0
  using params = max_pool2d_params;
  static constexpr std::tuple fields{
      required("kernel_size", &params::kernel_size), positional("stride", &params::stride),
      positional("padding", &params::padding), positional("dilation", &params::dilation),
      positional("ceil_mode", &params::ceil_mode)};

  static kernels::pool2d_geometry geometry(const params& p, const Shape& x) {
    detail::require_nchw(target, x);
    kernels::pool2d_geometry g = detail::pool_geometry(x, p.kernel_size, p.stride, p.padding);
    g.dilation_h = p.dilation.h;
    g.dilation_w = p.dilation.w;
    g.ceil_mode = p.ceil_mode;
    kernels::validate(g, target);
    return g;
  }
  static void run(const kernels::pool2d_geometry& g, const float* x, float* y) { kernels::max_pool2d(g, x, y); }

  static void onnx_export(onnx_export_context& cx, const params& p) {
    cx.node("MaxPool", {cx.input(0).name}, {cx.output()},
            {{"kernel_shape", detail::onnx_hw(p.kernel_size)}, {"strides", detail::onnx_hw(p.stride.value_or(p.kernel_size))},
             {"pads", detail::onnx_pads(p.padding)}, {"dilations", detail::onnx_hw(p.dilation)},
             {"ceil_mode", std::int64_t{p.ceil_mode}}});
  }
  static constexpr std::array onnx_import_types{std::string_view("MaxPool")};
  static constexpr std::array onnx_import_attributes{
      std::string_view("auto_pad"),     std::string_view("ceil_mode"), std::string_view("dilations"),
      std::string_view("kernel_shape"), std::string_view("pads"),      std::string_view("storage_order"),
      std::string_view("strides")};
  static void onnx_import(onnx_import_context& cx) {
    cx.only_first_output("MaxPool's Indices");
    const onnx_value x = cx.tensor(0);
    cx.require_2d(cx.shape(x));
    const onnx_window g = cx.window(cx.shape(x), cx.kernel_shape());
    cx.bind(cx.call<max_pool2d_fn>({g.kernel, g.stride, g.padding, g.dilation, cx.attr_int("ceil_mode", 0) != 0}, x));
  }
};
inline constexpr max_pool2d_fn max_pool2d{};
TRACEMOD_REGISTER_BUILTIN_OP(max_pool2d_fn);

struct avg_pool2d_params {
  pair2 kernel_size{1};
  std::optional<pair2> stride{};
  pair2 padding{0};
  bool ceil_mode = false;
  bool count_include_pad = true;
};

struct avg_pool2d_fn : window_pool_op<avg_pool2d_fn> {
  static constexpr std::string_view name = "avg_pool2d";
  static constexpr std::string_view target = "nn.avg_pool2d";
  static constexpr scale_rule scaling = scale_rule::linear;  // a mean of k*x is k times the mean (zero padding stays zero)
  using params = avg_pool2d_params;
  static constexpr std::tuple fields{
      required("kernel_size", &params::kernel_size), positional("stride", &params::stride),
      positional("padding", &params::padding), positional("ceil_mode", &params::ceil_mode),
      positional("count_include_pad", &params::count_include_pad)};

  static kernels::pool2d_geometry geometry(const params& p, const Shape& x) {
    detail::require_nchw(target, x);
    kernels::pool2d_geometry g = detail::pool_geometry(x, p.kernel_size, p.stride, p.padding);
    g.ceil_mode = p.ceil_mode;
    g.count_include_pad = p.count_include_pad;
    kernels::validate(g, target);
    return g;
  }
  static void run(const kernels::pool2d_geometry& g, const float* x, float* y) { kernels::avg_pool2d(g, x, y); }

  static void onnx_export(onnx_export_context& cx, const params& p) {
    cx.node("AveragePool", {cx.input(0).name}, {cx.output()},
            {{"kernel_shape", detail::onnx_hw(p.kernel_size)}, {"strides", detail::onnx_hw(p.stride.value_or(p.kernel_size))},
             {"pads", detail::onnx_pads(p.padding)}, {"ceil_mode", std::int64_t{p.ceil_mode}},
             {"count_include_pad", std::int64_t{p.count_include_pad}}});
  }
  static constexpr std::array onnx_import_types{std::string_view("AveragePool")};
  static constexpr std::array onnx_import_attributes{std::string_view("auto_pad"),          std::string_view("ceil_mode"),
                                                     std::string_view("count_include_pad"), std::string_view("kernel_shape"),
                                                     std::string_view("pads"),              std::string_view("strides")};
  static void onnx_import(onnx_import_context& cx) {
    const onnx_value x = cx.tensor(0);
    cx.require_2d(cx.shape(x));
    const onnx_window g = cx.window(cx.shape(x), cx.kernel_shape());
    cx.bind(cx.call<avg_pool2d_fn>(
        {g.kernel, g.stride, g.padding, cx.attr_int("ceil_mode", 0) != 0, cx.attr_int("count_include_pad", 0) != 0}, x));
  }
};
inline constexpr avg_pool2d_fn avg_pool2d{};
TRACEMOD_REGISTER_BUILTIN_OP(avg_pool2d_fn);

struct adaptive_avg_pool2d_params {
  pair2 oshp{1};
};

/// Averages over the input split into oshp (PyTorch's adaptive bins).
struct adaptive_avg_pool2d_fn : op_base<adaptive_avg_pool2d_fn> {
  static constexpr std::string_view name = "adaptive_avg_pool2d";
  static constexpr std::string_view target = "nn.adaptive_avg_pool2d";
  static constexpr scale_rule scaling = scale_rule::linear;  // a mean of k*x is k times the mean
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = adaptive_avg_pool2d_params;
  static constexpr std::tuple fields{required("oshp", &params::oshp)};

  static constexpr Shape infer_shape(const params& p, const Shape& x) {
    detail::require_nchw(target, x);
    if (p.oshp.h < 0 || p.oshp.w < 0)
      throw value_error(std::string(target) + ": output size " + repr(p.oshp) + " must be non-negative");
    if ((x[2] == 0 || x[3] == 0) && p.oshp.h > 0 && p.oshp.w > 0)
      throw shape_error(std::string(target) + ": input " + x.to_string() + " has an empty plane but the output size is " +
                        repr(p.oshp));
    return Shape{x[0], x[1], p.oshp.h, p.oshp.w};
  }
  static Dims infer_dims(const params& p, const ShapeDims& x) { return {x.dims[0], x.dims[1], p.oshp.h, p.oshp.w}; }
  /// One add per input element and one division per output element (bins that tile the input).
  static constexpr op_cost cost(const params&, const Shape& out, const Shape& x) {
    return flop_cost(x.numel() + out.numel());
  }
  static Tensor eager(const params& p, const Tensor& x) {
    require_float32(target, "inp", x);
    Tensor y = Tensor::empty(infer_shape(p, x.shape()), DType::float32, target);
    kernels::adaptive_avg_pool2d(x.data<float>(), y.data<float>(), x.size(0), x.size(1), x.size(2), x.size(3), p.oshp.h,
                                 p.oshp.w);
    return y;
  }

  /// Output (1, 1) is GlobalAveragePool; an output size dividing the input is AveragePool with
  /// kernel = stride = input / output (the same bins); other sizes have uneven bins ONNX cannot express.
  static void onnx_export(onnx_export_context& cx, const params& p) {
    if (p.oshp == pair2{1, 1}) {
      cx.node("GlobalAveragePool", {cx.input(0).name}, {cx.output()});
      return;
    }
    const Shape& x = cx.input(0).shape;
    const std::int64_t h = x[2], w = x[3];
    if (p.oshp.h <= 0 || p.oshp.w <= 0 || h % p.oshp.h != 0 || w % p.oshp.w != 0)
      cx.refuse("adaptive average pooling of " + x.to_string() + " to " + repr(p.oshp) +
                " has uneven bins, which no ONNX pooling expresses (use an input size divisible by the output size)");
    const pair2 k{h / p.oshp.h, w / p.oshp.w};
    avg_pool2d_fn::onnx_export(cx, {.kernel_size = k, .stride = k, .padding = 0, .ceil_mode = false, .count_include_pad = true});
  }
  static constexpr std::array onnx_import_types{std::string_view("GlobalAveragePool")};
  static void onnx_import(onnx_import_context& cx) {
    const onnx_value x = cx.tensor(0);
    cx.require_2d(cx.shape(x));
    cx.bind(cx.call<adaptive_avg_pool2d_fn>({pair2{1, 1}}, x));
  }
};
inline constexpr adaptive_avg_pool2d_fn adaptive_avg_pool2d{};
TRACEMOD_REGISTER_BUILTIN_OP(adaptive_avg_pool2d_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
