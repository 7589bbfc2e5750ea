// conv2d (NCHW, cross-correlation as in PyTorch/MegEngine), and conv_bias_activation: a conv whose
// kernel also adds a residual and applies relu / relu6 as it stores its output (MegEngine's
// conv_bias_activation, with its z operand).
#pragma once

#include <tracemod/functional/elementwise.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/conv2d.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace tracemod::functional {

struct conv2d_params {
  pair2 stride{1};
  pair2 padding{0};
  pair2 dilation{1};
  std::int64_t groups = 1;
};

struct conv2d_fn : op_base<conv2d_fn> {
  static constexpr std::string_view name = "conv2d";
  static constexpr std::string_view target = "nn.conv2d";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands = weighted_operands;
  using params = conv2d_params;
  static constexpr std::tuple fields{positional("stride", &params::stride), positional("padding", &params::padding),
                                     positional("dilation", &params::dilation), positional("groups", &params::groups)};

  /// The kernel geometry of a call; checks ranks, channel counts and bias (shape_error) and the
  /// hyper-parameters (value_error); messages start with `op`.
  static kernels::conv2d_geometry geometry(const params& p, const Shape& x, const Shape& w, const Shape* bias,
                                           std::string_view op = target) {
    const auto where = [&] {
      return std::string(op) + ": input " + x.to_string() + ", weight " + w.to_string() + ", " +
             params_repr<conv2d_fn>(p);
    };
    if (x.rank() != 4 || w.rank() != 4)
      throw shape_error(where() + ": input and weight must be 4-D (N, C, H, W) and (out_channels, in_channels/groups, kH, kW)");
    if (p.groups < 1) throw value_error(where() + ": groups must be positive");
    const std::int64_t expected = checked_mul(w[1], p.groups, op, "in_channels/groups x groups");
    if (x[1] != expected)
      throw shape_error(where() + ": input has " + std::to_string(x[1]) + " channels but the weight expects " +
                        std::to_string(expected) + " (in_channels/groups=" + std::to_string(w[1]) +
                        " x groups=" + std::to_string(p.groups) + ")");
    if (w[0] % p.groups != 0)
      throw shape_error(where() + ": out_channels " + std::to_string(w[0]) + " is not divisible by groups");
    if (bias && !(bias->rank() == 1 && (*bias)[0] == w[0]))
      throw shape_error(where() + ": bias " + bias->to_string() + " must be (" + std::to_string(w[0]) + ",)");
    kernels::conv2d_geometry g{};
    g.n = x[0];
    g.c = x[1];
    g.h = x[2];
    g.w = x[3];
    g.k = w[0];
    g.r = w[2];
    g.s = w[3];
    g.stride_h = p.stride.h;
    g.stride_w = p.stride.w;
    g.pad_h = p.padding.h;
    g.pad_w = p.padding.w;
    g.dil_h = p.dilation.h;
    g.dil_w = p.dilation.w;
    g.groups = p.groups;
    kernels::validate(g, op);
    return g;
  }

  /// Some groups value makes input channels x[1] and weight (k, c/groups, r, s) agree.
  static constexpr bool channels_agree(const Shape& x, const Shape& w) {
    if (x.rank() != 4 || w.rank() != 4 || w[1] == 0) return false;
    if (x[1] % w[1] != 0) return false;
    const std::int64_t groups = x[1] / w[1];
    return groups > 0 && w[0] % groups == 0;
  }

  /// The typed tracer's check of static operand shapes (one type per operand: ::is_static, and the
  /// Shape ::value when static): a readable compile-time error where no params can make them agree.
  template <class X, class W, class Bias>
  static consteval bool check_static_shapes() {
    if constexpr (X::is_static && W::is_static) {
      static_assert(channels_agree(X::value, W::value),
                    "tmod::symbolic_trace: F::conv2d's static input channels do not match the weight's declared "
                    "channels (input (N, C, H, W) needs weight (K, C / groups, kH, kW)); fix the spec shapes");
      return channels_agree(X::value, W::value);
    }
    return true;
  }

  static Shape infer_shape(const params& p, const Shape& x, const Shape& w, const Shape* bias) {
    const kernels::conv2d_geometry g = geometry(p, x, w, bias);
    return Shape{g.n, g.k, g.out_h(), g.out_w()};
  }
  /// (N, K, (H + 2*pad - dilation*(kH-1) - 1)/stride + 1, ... W).
  static Dims infer_dims(const params& p, const ShapeDims& x, const ShapeDims& w, const ShapeDims*) {
    return {x.dims[0], w.dims[0], window_extent(x.dims[2], w.shape[2], p.stride.h, p.padding.h, p.dilation.h),
            window_extent(x.dims[3], w.shape[3], p.stride.w, p.padding.w, p.dilation.w)};
  }

  /// Direct convolution: each output element accumulates (C / groups) x kH x kW products; a bias
  /// adds one operation per output element.
  static op_cost cost(const params& p, const Shape& out, const Shape& x, const Shape& w, const Shape* bias) {
    const kernels::conv2d_geometry g = geometry(p, x, w, bias);
    return mac_cost(out.numel() * (g.c / g.groups) * g.r * g.s, bias ? out.numel() : 0);
  }

  /// A checked call: its kernel geometry and its (uninitialised) float32 output.
  struct call {
    kernels::conv2d_geometry geometry;
    Tensor out;
  };

  /// Checks the operands of a call (float32, shapes, hyper-parameters; messages start with `op`)
  /// and allocates its output: what every eager entry point running a conv kernel does first.
  static call prepare(const params& p, const Tensor& x, const Tensor& w, const Tensor* b,
                      std::string_view op = target) {
    require_float32(op, "inp", x);
    require_float32(op, "weight", w);
    if (b) require_float32(op, "bias", *b);
    const Shape bias_shape = b ? b->shape() : Shape{};
    const kernels::conv2d_geometry g = geometry(p, x.shape(), w.shape(), b ? &bias_shape : nullptr, op);
    return {g, Tensor::empty(Shape{g.n, g.k, g.out_h(), g.out_w()}, DType::float32, op)};
  }

  static Tensor eager(const params& p, const Tensor& x, const Tensor& w, none_t) { return run(p, x, w, nullptr); }
  static Tensor eager(const params& p, const Tensor& x, const Tensor& w, const Tensor& b) { return run(p, x, w, &b); }

 private:
  static Tensor run(const params& p, const Tensor& x, const Tensor& w, const Tensor* b) {
    auto [g, y] = prepare(p, x, w, b);
    kernels::conv2d(g, x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr, y.data<float>());
    return y;
  }

 public:
  static void onnx_export(onnx_export_context& cx, const params& p) {
    const onnx_operand& w = cx.input(1);
    std::vector<std::string> in{cx.input(0).name, w.name};
    if (cx.input(2).is_tensor()) in.push_back(cx.input(2).name);
    cx.node("Conv", in, {cx.output()},
            {{"kernel_shape", std::vector<std::int64_t>{w.shape[2], w.shape[3]}},
             {"strides", std::vector<std::int64_t>{p.stride.h, p.stride.w}},
             {"pads", std::vector<std::int64_t>{p.padding.h, p.padding.w, p.padding.h, p.padding.w}},
             {"dilations", std::vector<std::int64_t>{p.dilation.h, p.dilation.w}},
             {"group", p.groups}});
  }
  static constexpr std::array onnx_import_types{std::string_view("Conv")};
  static constexpr std::array onnx_import_attributes{std::string_view("auto_pad"), std::string_view("dilations"),
                                                     std::string_view("group"),    std::string_view("kernel_shape"),
                                                     std::string_view("pads"),     std::string_view("strides")};
  static void onnx_import(onnx_import_context& cx) {
    const onnx_value x = cx.tensor(0);
    const onnx_value w = cx.tensor(1);
    cx.require_2d(cx.shape(x));
    const Shape& ws = cx.shape(w);
    if (ws.rank() != 4) cx.unsupported("a weight of shape " + ws.to_string());
    const std::vector<std::int64_t> k = cx.attr_ints("kernel_shape", {ws[2], ws[3]});
    if (k != std::vector<std::int64_t>{ws[2], ws[3]})
      cx.unsupported("attribute kernel_shape=" + ints_repr(k) + " differs from the weight " + ws.to_string());
    const onnx_window g = cx.window(cx.shape(x), k);
    cx.bind(cx.call<conv2d_fn>({g.stride, g.padding, g.dilation, cx.attr_int("group", 1)}, x, w, cx.optional(2)));
  }
};
inline constexpr conv2d_fn conv2d{};
TRACEMOD_REGISTER_BUILTIN_OP(conv2d_fn);

struct conv_bias_activation_params {
  pair2 stride{1};
  pair2 padding{0};
  pair2 dilation{1};
  std::int64_t groups = 1;
  std::string nonlinear_mode = "identity";  ///< "identity", "relu" or "relu6"
};

/// nonlinear_mode(conv2d(inp, weight, bias) + z): one kernel call that adds the bias and the residual
/// z (same shape as the output) and applies the activation while the output tiles are in registers
/// or cache. Its result has the bits of conv2d, add and relu / relu6 run one after the other.
struct conv_bias_activation_fn : op_base<conv_bias_activation_fn> {
  static constexpr std::string_view name = "conv_bias_activation";
  static constexpr std::string_view target = "nn.conv_bias_activation";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}, operand{"weight", operand_kind::tensor},
                                       operand{"bias", operand_kind::optional_tensor},
                                       operand{"z", operand_kind::optional_tensor}};
  using params = conv_bias_activation_params;
  static constexpr std::tuple fields{positional("stride", &params::stride), positional("padding", &params::padding),
                                     positional("dilation", &params::dilation), positional("groups", &params::groups),
                                     positional("nonlinear_mode", &params::nonlinear_mode)};
  /// Indexed by kernels::activation.
  static constexpr std::array<std::string_view, 3> nonlinear_modes{"identity", "relu", "relu6"};
  static_assert(static_cast<int>(kernels::activation::relu6) == 2, "nonlinear_modes follows kernels::activation");

  /// The kernel's activation for a mode; throws value_error listing the modes.
  static kernels::activation activation_of(std::string_view mode) {
    for (std::size_t i = 0; i < nonlinear_modes.size(); ++i)
      if (nonlinear_modes[i] == mode) return static_cast<kernels::activation>(i);
    throw value_error(std::string(target) + ": unknown nonlinear_mode '" + std::string(mode) +
                      "' (supported: identity, relu, relu6)");
  }

  /// The convolution part of the parameters.
  static conv2d_fn::params conv_params(const params& p) { return {p.stride, p.padding, p.dilation, p.groups}; }

  /// A residual z must have the output's shape.
  static void check_z(const kernels::conv2d_geometry& g, const Shape& x, const Shape& w, const Shape* z) {
    const Shape out{g.n, g.k, g.out_h(), g.out_w()};
    if (z != nullptr && *z != out)
      throw shape_error(std::string(target) + ": z " + z->to_string() + " must have the output's shape " +
                        out.to_string() + " (input " + x.to_string() + ", weight " + w.to_string() + ")");
  }

  static kernels::conv2d_geometry geometry(const params& p, const Shape& x, const Shape& w, const Shape* bias,
                                           const Shape* z) {
    (void)activation_of(p.nonlinear_mode);
    const kernels::conv2d_geometry g = conv2d_fn::geometry(conv_params(p), x, w, bias, target);
    check_z(g, x, w, z);
    return g;
  }

  static Dims infer_dims(const params& p, const ShapeDims& x, const ShapeDims& w, const ShapeDims* bias,
                         const ShapeDims*) {
    return conv2d_fn::infer_dims(conv_params(p), x, w, bias);
  }
  static Shape infer_shape(const params& p, const Shape& x, const Shape& w, const Shape* bias, const Shape* z) {
    const kernels::conv2d_geometry g = geometry(p, x, w, bias, z);
    return Shape{g.n, g.k, g.out_h(), g.out_w()};
  }

  /// conv2d's cost, plus one operation per output element for the residual and one for the
  /// activation.
  static op_cost cost(const params& p, const Shape& out, const Shape& x, const Shape& w, const Shape* bias,
                      const Shape* z) {
    op_cost c = conv2d_fn::cost(conv_params(p), out, x, w, bias);
    c.flops += ((z ? 1 : 0) + (activation_of(p.nonlinear_mode) != kernels::activation::none ? 1 : 0)) * out.numel();
    return c;
  }

  template <class B, class Z>
  static Tensor eager(const params& p, const Tensor& x, const Tensor& w, const B& bias, const Z& z) {
    const auto ptr = [](const auto& t, std::string_view arg) -> const Tensor* {
      if constexpr (std::same_as<std::remove_cvref_t<decltype(t)>, none_t>) {
        return nullptr;
      } else {
        require_float32(target, arg, t);
        return &t;
      }
    };
    const kernels::activation act = activation_of(p.nonlinear_mode);
    const Tensor* b = ptr(bias, "bias");
    const Tensor* r = ptr(z, "z");
    auto [g, y] = conv2d_fn::prepare(conv_params(p), x, w, b, target);
    if (r != nullptr) check_z(g, x.shape(), w.shape(), &r->shape());
    // The kernel reads z while writing y: a z sharing y's storage would be read after being written.
    const kernels::conv2d_epilogue e{b ? b->data<float>() : nullptr, r ? r->data<float>() : nullptr, act};
    if (const auto filters = winograd_filters(g, w))
      kernels::conv2d_winograd(g, x.data<float>(), filters->data(), e, y.data<float>());
    else
      kernels::conv2d_bias_activation(g, x.data<float>(), w.data<float>(), e, y.data<float>());
    return y;
  }

  /// The kind of a read-only weight's derived data (Tensor::derived): its Winograd filters.
  struct winograd_filters_tag {
    static constexpr const char* name = "Winograd filters";
  };

  /// A read-only weight (one FuseConvEpilogue made so: it cannot change) keeps its Winograd filters,
  /// transformed on the first call, when the kernel would run Winograd with them; null otherwise.
  static std::shared_ptr<const kernels::aligned_floats> winograd_filters(const kernels::conv2d_geometry& g, const Tensor& w) {
    if (!w.read_only() || !kernels::conv2d_prefers_winograd_filters(g)) return nullptr;
    // Keyed on the tile size as well: one weight can run at batch 1 (F(2x2) on 7x7 planes) and batch 8.
    const auto& s = w.shape();
    const derived_key key =
        derived_key::of<winograd_filters_tag>({s[0], s[1], s[2], s[3], kernels::conv2d_winograd_tile(g)});
    return w.derived<kernels::aligned_floats>(key,
                                              [&] { return kernels::conv2d_winograd_filters(g, w.data<float>()); });
  }

  /// (inp, weight[, bias[, z]][, params]) and (inp, weight, bias, z, stride[, padding[, dilation[,
  /// groups[, nonlinear_mode]]]]): four operands are one more than the generated call forms take.
  template <class X, class W, class B = none_t, class Z = none_t>
  decltype(auto) operator()(const X& x, const W& w, const B& bias = none, const Z& z = none, const params& p = {}) const {
    return apply(p, x, w, bias, z);
  }
  template <class X, class W>
  decltype(auto) operator()(const X& x, const W& w, const params& p) const {
    return apply(p, x, w, none, none);
  }
  template <class X, class W, class B>
  decltype(auto) operator()(const X& x, const W& w, const B& bias, const params& p) const {
    return apply(p, x, w, bias, none);
  }
  template <class X, class W, class B, class Z>
  decltype(auto) operator()(const X& x, const W& w, const B& bias, const Z& z, pair2 stride, pair2 padding = 0,
                            pair2 dilation = 1, std::int64_t groups = 1,
                            std::string_view nonlinear_mode = "identity") const {
    return apply(params{stride, padding, dilation, groups, std::string(nonlinear_mode)}, x, w, bias, z);
  }

  /// Conv, then Add of the residual z, then the activation: the three ops the kernel fuses.
  static void onnx_export(onnx_export_context& cx, const params& p) {
    const kernels::activation act = activation_of(p.nonlinear_mode);
    const bool residual = cx.input(3).is_tensor();
    const bool activated = act != kernels::activation::none;
    const std::string conv_out = residual || activated ? cx.fresh(cx.output() + "_conv") : cx.output();
    onnx_export_context conv = cx.with(cx.sub_call({cx.input(0), cx.input(1), cx.input(2)}, conv_out));
    conv2d_fn::onnx_export(conv, {p.stride, p.padding, p.dilation, p.groups});
    std::string y = conv_out;
    if (residual) y = cx.node1("Add", {y, cx.input(3).name}, activated ? cx.fresh(cx.output() + "_add") : cx.output());
    onnx_export_context last = cx.with(cx.sub_call({onnx_operand::tensor(y, cx.output_shape())}, cx.output()));
    if (act == kernels::activation::relu) relu_fn::onnx_export(last, {});
    if (act == kernels::activation::relu6) relu6_fn::onnx_export(last, {});
  }
};
inline constexpr conv_bias_activation_fn conv_bias_activation{};
TRACEMOD_REGISTER_BUILTIN_OP(conv_bias_activation_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
