// quantized_conv2d and quantized_linear: conv2d (NCHW) and linear on a uint8 input with per-tensor
// qparams, int8 weights symmetric per output channel (zero point 0, one scale each, a float32
// operand), an int32 bias at scale s_in * s_w[j], and a uint8 output with its own qparams. Both run
// the int8 GEMM (kernels/int8_gemm.hpp): raw = sum (x - z_in) * w + bias exact in int32, then
//   y = clamp(nearbyint(float(raw) * M_j) + z_out, qmin, qmax),  M_j = s_in * s_w[j] / s_out (float32)
// with relu folded in as qmin = z_out and relu6 as qmax = z_out + nearbyint(6 * (1 / s_out)).
// The convolution is im2col per (image, group): padding reads z_in, the real zero. A read-only
// weight (quant::convert makes its weights so) is packed once and kept with its buffer.
#pragma once

#include <tracemod/functional/conv.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/quantize.hpp>
#include <tracemod/kernels/conv2d.hpp>
#include <tracemod/kernels/int8_gemm.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace tracemod::functional {

struct conv2d_fn;  // functional/conv.hpp

/// The input and output qparams and the folded activation of a quantized linear.
struct quantized_io {
  double in_scale = 1;
  std::int64_t in_zero_point = 0;
  double scale = 1;  ///< the output's
  std::int64_t zero_point = 0;
  std::string nonlinear_mode = "identity";  ///< "identity", "relu" or "relu6"
};

namespace detail {

/// The kind of a read-only int8 weight's derived data: its packed GEMM panels, one per group.
struct int8_packed_weight_tag {
  static constexpr const char* name = "packed int8 weight";
};
using int8_packed_groups = std::vector<kernels::int8_packed_b>;

/// The packed B of each group: group g's k_per_group x n_per_group block of the weight, whose rows
/// (output channels) hold `k_per_group` contiguous int8 values.
inline std::shared_ptr<const int8_packed_groups> pack_int8_weight(const Tensor& w, std::int64_t groups,
                                                                  std::int64_t k_per_group, std::int64_t n_per_group) {
  const auto make = [&] {
    int8_packed_groups packs;
    packs.reserve(static_cast<std::size_t>(groups));
    for (std::int64_t g = 0; g < groups; ++g)
      packs.emplace_back(k_per_group, n_per_group, w.data<std::int8_t>() + g * n_per_group * k_per_group, k_per_group,
                         true);
    return packs;
  };
  if (w.read_only())
    return w.derived<int8_packed_groups>(derived_key::of<int8_packed_weight_tag>({groups, k_per_group, n_per_group}), make);
  return std::make_shared<const int8_packed_groups>(make());
}

/// Checks the qparams, the weight's dtype and per-channel scales (one positive finite float32 per
/// output channel) and the bias (int32); returns the multipliers M_j and the epilogue's clamp.
struct quantized_epilogue {
  std::vector<float> multiplier;
  std::int32_t qmin = 0, qmax = 255;
};
template <class Q>  // quantized_io or quantized_conv2d_params
quantized_epilogue quantized_layer_epilogue(std::string_view op, const Q& q, const Tensor& x,
                                                   const Tensor& w, const Tensor& w_scale, const Tensor* bias,
                                                   std::int64_t channels) {
  require_quantized(op, "inp", x, DType::uint8);
  require_quantized(op, "weight", w, DType::int8);
  check_quantized_qparams(op, "input", q.in_scale, q.in_zero_point, DType::uint8);
  check_quantized_qparams(op, "output", q.scale, q.zero_point, DType::uint8);
  require_float32(op, "weight_scale", w_scale);
  if (w_scale.shape() != Shape{channels})
    throw shape_error(std::string(op) + ": weight_scale " + w_scale.shape().to_string() + " must be (" +
                      std::to_string(channels) + ",), one scale per output channel");
  if (bias != nullptr) {
    require_quantized(op, "bias", *bias, DType::int32);
    if (bias->shape() != Shape{channels})
      throw shape_error(std::string(op) + ": bias " + bias->shape().to_string() + " must be (" + std::to_string(channels) + ",)");
  }
  quantized_epilogue e;
  const auto s_in = static_cast<float>(q.in_scale), s_out = static_cast<float>(q.scale);
  for (std::int64_t j = 0; j < channels; ++j) {
    const float s_w = w_scale.data<float>()[j];
    if (!(s_w > 0.f) || !std::isfinite(s_w))
      throw value_error(std::string(op) + ": weight_scale[" + std::to_string(j) + "] is " + repr_real(s_w) +
                        ", but must be positive and finite");
    e.multiplier.push_back(s_in * s_w / s_out);
  }
  const kernels::activation act = quantized_activation(op, q.nonlinear_mode);
  const auto z_out = static_cast<std::int32_t>(q.zero_point);
  if (act != kernels::activation::none) e.qmin = z_out;
  if (act == kernels::activation::relu6) {
    const float six = std::nearbyint(6.0f * (1.0f / s_out)) + static_cast<float>(z_out);
    e.qmax = six >= 255.f ? 255 : static_cast<std::int32_t>(six);
  }
  return e;
}

}  // namespace detail

/// What quantized_conv2d and quantized_linear share: the operands (inp uint8, weight int8,
/// weight_scale float32 per output channel, bias int32 or none), the uint8 output, the four-operand
/// call form and the eager entry points, which run Derived::run.
template <class Derived>
struct quantized_layer_op : op_base<Derived> {
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}, operand{"weight", operand_kind::tensor},
                                       operand{"weight_scale", operand_kind::tensor},
                                       operand{"bias", operand_kind::optional_tensor}};
  static DType infer_dtype(const void*, std::span<const DType>) { return DType::uint8; }

  /// (inp, weight, weight_scale, bias or tmod::none, params): four operands, one more than the
  /// generated call forms take.
  template <class X, class W, class S, class B, class P>
  decltype(auto) operator()(const X& x, const W& w, const S& s, const B& bias, const P& p) const {
    return op_base<Derived>::apply(p, x, w, s, bias);
  }

  template <class P>
  static Tensor eager(const P& p, const Tensor& x, const Tensor& w, const Tensor& s, none_t) {
    return Derived::run(p, x, w, s, nullptr);
  }
  template <class P>
  static Tensor eager(const P& p, const Tensor& x, const Tensor& w, const Tensor& s, const Tensor& b) {
    return Derived::run(p, x, w, s, &b);
  }
};

struct quantized_conv2d_params {
  pair2 stride{1};
  pair2 padding{0};
  pair2 dilation{1};
  std::int64_t groups = 1;
  double in_scale = 1;
  std::int64_t in_zero_point = 0;
  double scale = 1;  ///< the output's
  std::int64_t zero_point = 0;
  std::string nonlinear_mode = "identity";  ///< "identity", "relu" or "relu6"
};

struct quantized_conv2d_fn : quantized_layer_op<quantized_conv2d_fn> {
  static constexpr std::string_view name = "quantized_conv2d";
  static constexpr std::string_view target = "nn.quantized_conv2d";
  using params = quantized_conv2d_params;
  static constexpr std::tuple fields{
      positional("stride", &params::stride),         positional("padding", &params::padding),
      positional("dilation", &params::dilation),     positional("groups", &params::groups),
      positional("in_scale", &params::in_scale),     positional("in_zero_point", &params::in_zero_point),
      positional("scale", &params::scale),           positional("zero_point", &params::zero_point),
      positional("nonlinear_mode", &params::nonlinear_mode)};

  /// conv2d's checked geometry of a call. Conv is conv2d_fn, as a template parameter: this header is
  /// also read while functional/conv.hpp is (conv.hpp includes elementwise.hpp, whose registry
  /// include reads every op header), before conv2d_fn is complete; a call is compiled after.
  template <class Conv = conv2d_fn>
  static kernels::conv2d_geometry geometry(const params& p, const Shape& x, const Shape& w, const Shape* bias) {
    return Conv::geometry(typename Conv::params{p.stride, p.padding, p.dilation, p.groups}, x, w, bias, target);
  }

  static Shape infer_shape(const params& p, const Shape& x, const Shape& w, const Shape&, const Shape* bias) {
    const kernels::conv2d_geometry g = geometry(p, x, w, bias);
    return Shape{g.n, g.k, g.out_h(), g.out_w()};
  }

 private:
  friend quantized_layer_op;
  static Tensor run(const params& p, const Tensor& x, const Tensor& w, const Tensor& s, const Tensor* b) {
    const Shape bias_shape = b ? b->shape() : Shape{};
    const kernels::conv2d_geometry g = geometry(p, x.shape(), w.shape(), b ? &bias_shape : nullptr);
    const detail::quantized_epilogue e = detail::quantized_layer_epilogue(target, p, x, w, s, b, g.k);
    const std::int64_t cg = g.c / g.groups, kg = g.k / g.groups, kdim = cg * g.r * g.s;
    const std::int64_t oh = g.out_h(), ow = g.out_w(), pixels = oh * ow;
    const auto packs = detail::pack_int8_weight(w, g.groups, kdim, kg);
    Tensor y = Tensor::empty(Shape{g.n, g.k, oh, ow}, DType::uint8, target);
    std::vector<std::uint8_t> cols(static_cast<std::size_t>(pixels * kdim)), out(static_cast<std::size_t>(pixels * kg));
    const std::uint8_t* in = x.data<std::uint8_t>();
    std::uint8_t* dst = y.data<std::uint8_t>();
    const auto z_in = static_cast<std::uint8_t>(p.in_zero_point);
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t grp = 0; grp < g.groups; ++grp) {
        im2col(g, in + (n * g.c + grp * cg) * g.h * g.w, cg, z_in, cols.data());
        const std::span<const float> m(e.multiplier.data() + grp * kg, static_cast<std::size_t>(kg));
        kernels::int8_gemm(pixels, kdim, cols.data(), kdim, (*packs)[static_cast<std::size_t>(grp)],
                           {.a_zero_point = static_cast<std::int32_t>(p.in_zero_point),
                            .bias = b ? b->data<std::int32_t>() + grp * kg : nullptr,
                            .multiplier = m,
                            .out_zero_point = static_cast<std::int32_t>(p.zero_point),
                            .qmin = e.qmin,
                            .qmax = e.qmax},
                           out.data(), kg);
        std::uint8_t* plane = dst + (n * g.k + grp * kg) * pixels;
        for (std::int64_t px = 0; px < pixels; ++px)
          for (std::int64_t j = 0; j < kg; ++j) plane[j * pixels + px] = out[static_cast<std::size_t>(px * kg + j)];
      }
    return y;
  }

  /// Row px of `cols` holds the (channel, kernel row, kernel column) window of output pixel px;
  /// positions in the padding read `pad`.
  static void im2col(const kernels::conv2d_geometry& g, const std::uint8_t* x, std::int64_t channels, std::uint8_t pad,
                     std::uint8_t* cols) {
    const std::int64_t oh = g.out_h(), ow = g.out_w();
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j)
        for (std::int64_t c = 0; c < channels; ++c)
          for (std::int64_t r = 0; r < g.r; ++r) {
            const std::int64_t ih = i * g.stride_h - g.pad_h + r * g.dil_h;
            for (std::int64_t s = 0; s < g.s; ++s) {
              const std::int64_t iw = j * g.stride_w - g.pad_w + s * g.dil_w;
              const bool inside = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
              *cols++ = inside ? x[(c * g.h + ih) * g.w + iw] : pad;
            }
          }
  }
};
inline constexpr quantized_conv2d_fn quantized_conv2d{};
TRACEMOD_REGISTER_BUILTIN_OP(quantized_conv2d_fn);

struct quantized_linear_fn : quantized_layer_op<quantized_linear_fn> {
  static constexpr std::string_view name = "quantized_linear";
  static constexpr std::string_view target = "nn.quantized_linear";
  using params = quantized_io;
  static constexpr std::tuple fields{
      positional("in_scale", &params::in_scale), positional("in_zero_point", &params::in_zero_point),
      positional("scale", &params::scale), positional("zero_point", &params::zero_point),
      positional("nonlinear_mode", &params::nonlinear_mode)};

  /// x (..., in_features), weight (out_features, in_features) -> (..., out_features).
  static Shape infer_shape(const params&, const Shape& x, const Shape& w, const Shape&, const Shape* bias) {
    if (x.rank() < 1 || w.rank() != 2 || x[x.rank() - 1] != w[1])
      throw shape_error(std::string(target) + ": input " + x.to_string() + " and weight " + w.to_string() +
                        " do not fit (input (..., in_features), weight (out_features, in_features))");
    if (bias && *bias != Shape{w[0]})
      throw shape_error(std::string(target) + ": bias " + bias->to_string() + " must be (" + std::to_string(w[0]) + ",)");
    Shape out = x;
    out[out.rank() - 1] = w[0];
    return out;
  }

 private:
  friend quantized_layer_op;
  static Tensor run(const params& p, const Tensor& x, const Tensor& w, const Tensor& s, const Tensor* b) {
    const Shape bias_shape = b ? b->shape() : Shape{};
    const Shape out_shape = infer_shape(p, x.shape(), w.shape(), s.shape(), b ? &bias_shape : nullptr);
    const std::int64_t in = w.shape()[1], outs = w.shape()[0], rows = in == 0 ? 0 : x.numel() / in;
    const detail::quantized_epilogue e = detail::quantized_layer_epilogue(target, p, x, w, s, b, outs);
    const auto packs = detail::pack_int8_weight(w, 1, in, outs);
    Tensor y = Tensor::empty(out_shape, DType::uint8, target);
    kernels::int8_gemm(rows, in, x.data<std::uint8_t>(), in, packs->front(),
                       {.a_zero_point = static_cast<std::int32_t>(p.in_zero_point),
                        .bias = b ? b->data<std::int32_t>() : nullptr,
                        .multiplier = e.multiplier,
                        .out_zero_point = static_cast<std::int32_t>(p.zero_point),
                        .qmin = e.qmin,
                        .qmax = e.qmax},
                       y.data<std::uint8_t>(), outs);
    return y;
  }
};
inline constexpr quantized_linear_fn quantized_linear{};
TRACEMOD_REGISTER_BUILTIN_OP(quantized_linear_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
