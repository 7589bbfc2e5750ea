// conv2d (NCHW, cross-correlation as in PyTorch/MegEngine).
#pragma once

#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/conv2d.hpp>

#include <array>
#include <string>
#include <tuple>

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
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}, operand{"weight", operand_kind::tensor},
                                       operand{"bias", operand_kind::optional_tensor}};
  using params = conv2d_params;
  static constexpr std::tuple fields{positional("stride", &params::stride), positional("padding", &params::padding),
                                     positional("dilation", &params::dilation), positional("groups", &params::groups)};

  /// The kernel geometry of a call; checks ranks, channel counts and bias (shape_error) and the
  /// hyper-parameters (value_error).
  static kernels::conv2d_geometry geometry(const params& p, const Shape& x, const Shape& w, const Shape* bias) {
    const auto where = [&] {
      return std::string(target) + ": input " + x.to_string() + ", weight " + w.to_string() + ", " +
             params_repr<conv2d_fn>(p);
    };
    if (x.rank() != 4 || w.rank() != 4)
      throw shape_error(where() + ": input and weight must be 4-D (N, C, H, W) and (out_channels, in_channels/groups, kH, kW)");
    if (p.groups < 1) throw value_error(where() + ": groups must be positive");
    const std::int64_t expected = checked_mul(w[1], p.groups, target, "in_channels/groups x groups");
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
    kernels::validate(g, target);
    return g;
  }

  static Shape infer_shape(const params& p, const Shape& x, const Shape& w, const Shape* bias) {
    const kernels::conv2d_geometry g = geometry(p, x, w, bias);
    return Shape{g.n, g.k, g.out_h(), g.out_w()};
  }

  static Tensor eager(const params& p, const Tensor& x, const Tensor& w, none_t) { return run(p, x, w, nullptr); }
  static Tensor eager(const params& p, const Tensor& x, const Tensor& w, const Tensor& b) { return run(p, x, w, &b); }

 private:
  static Tensor run(const params& p, const Tensor& x, const Tensor& w, const Tensor* b) {
    require_float32(target, "inp", x);
    require_float32(target, "weight", w);
    if (b) require_float32(target, "bias", *b);
    const Shape bias_shape = b ? b->shape() : Shape{};
    const kernels::conv2d_geometry g = geometry(p, x.shape(), w.shape(), b ? &bias_shape : nullptr);
    Tensor y = Tensor::empty(Shape{g.n, g.k, g.out_h(), g.out_w()}, DType::float32, target);
    kernels::conv2d(g, x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr, y.data<float>());
    return y;
  }
};
inline constexpr conv2d_fn conv2d{};

}  // namespace tracemod::functional
