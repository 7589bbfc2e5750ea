// Conv2d (PyTorch's nn.Conv2d / MegEngine's M.Conv2d, NCHW, zero padding).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/conv.hpp>
#include <tracemod/functional/params.hpp>
#include <tracemod/nn/init.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tracemod::nn {

/// Conv2d's keyword arguments: `{.stride = 2, .padding = 1, .bias = false}`.
struct Conv2dOptions {
  functional::pair2 stride{1};
  functional::pair2 padding{0};
  functional::pair2 dilation{1};
  std::int64_t groups = 1;
  bool bias = true;
};

class Conv2d : public Module {
 public:
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
  functional::pair2 kernel_size;
  functional::pair2 stride;
  functional::pair2 padding;
  functional::pair2 dilation;
  std::int64_t groups = 1;
  Parameter weight;  ///< (out_channels, in_channels / groups, kernel_h, kernel_w)
  Parameter bias;    ///< (out_channels,); undefined with .bias = false

  /// Conv2d(in_channels, out_channels, kernel_size, {stride, padding, dilation, groups, bias}),
  /// initialised as PyTorch does.
  Conv2d(std::int64_t in, std::int64_t out, functional::pair2 kernel, const Conv2dOptions& o = {})
      : in_channels(in), out_channels(out), kernel_size(kernel), stride(o.stride), padding(o.padding),
        dilation(o.dilation), groups(o.groups) {
    const auto fail = [&](const std::string& why) {
      return value_error("Conv2d(" + std::to_string(in) + ", " + std::to_string(out) + ", kernel_size=" +
                         functional::repr(kernel) + ", groups=" + std::to_string(o.groups) + "): " + why);
    };
    if (in < 0 || out < 0) throw fail("channel counts must be non-negative");
    if (o.groups < 1) throw fail("groups must be positive");
    if (in % o.groups != 0 || out % o.groups != 0)
      throw fail("in_channels and out_channels must be divisible by groups");
    if (kernel.h < 1 || kernel.w < 1) throw fail("kernel_size must be positive");
    if (o.stride.h < 1 || o.stride.w < 1 || o.dilation.h < 1 || o.dilation.w < 1 || o.padding.h < 0 || o.padding.w < 0)
      throw fail("stride and dilation must be positive and padding non-negative");
    weight = Tensor::empty({out, in / o.groups, kernel.h, kernel.w}, DType::float32, "Conv2d");
    if (o.bias) bias = Tensor::empty({out}, DType::float32, "Conv2d");
    init::default_layer_init_(weight, bias);
  }

  TM_BUILTIN_MODULE(Conv2d, weight, bias)

  [[nodiscard]] Value config() const {
    using functional::to_value;
    return Value::dict({{"in_channels", in_channels}, {"out_channels", out_channels},
                        {"kernel_size", to_value(kernel_size)}, {"stride", to_value(stride)},
                        {"padding", to_value(padding)}, {"dilation", to_value(dilation)},
                        {"groups", groups}, {"bias", bias.defined()}});
  }
  /// The Conv2d a config describes. It is built at 1x1 size (the constructor validates stride,
  /// padding, dilation and bias) so that no weight of the configured size is allocated or
  /// initialised: load assigns the saved tensors and checks them against tensor_shapes().
  static Conv2d from_config(const Value& c) {
    using functional::pair2;
    const auto in = config_field<std::int64_t>(c, "Conv2d", "in_channels");
    const auto out = config_field<std::int64_t>(c, "Conv2d", "out_channels");
    const auto groups = config_field<std::int64_t>(c, "Conv2d", "groups");
    const auto kernel = config_field<pair2>(c, "Conv2d", "kernel_size");
    Conv2d m(1, 1, 1,
             {.stride = config_field<pair2>(c, "Conv2d", "stride"),
              .padding = config_field<pair2>(c, "Conv2d", "padding"),
              .dilation = config_field<pair2>(c, "Conv2d", "dilation"),
              .groups = 1,
              .bias = config_field<bool>(c, "Conv2d", "bias")});
    if (in < 0 || out < 0 || groups < 1 || in % groups != 0 || out % groups != 0 || kernel.h < 1 || kernel.w < 1)
      throw value_error("Conv2d: in_channels=" + std::to_string(in) + ", out_channels=" + std::to_string(out) +
                        ", groups=" + std::to_string(groups) + ", kernel_size=" + functional::repr(kernel) +
                        " is no valid configuration");
    m.in_channels = in;
    m.out_channels = out;
    m.groups = groups;
    m.kernel_size = kernel;
    return m;
  }
  [[nodiscard]] tensor_shape_list tensor_shapes() const {
    const std::int64_t g = groups > 0 ? groups : 1;
    tensor_shape_list v{{"weight", Shape{out_channels, in_channels / g, kernel_size.h, kernel_size.w}}};
    if (bias.defined()) v.emplace_back("bias", Shape{out_channels});
    return v;
  }

  [[nodiscard]] functional::conv2d_fn::params conv_params() const { return {stride, padding, dilation, groups}; }

  [[nodiscard]] Tensor forward(const Tensor& x) const {
    return bias.defined() ? functional::conv2d(x, weight, bias, conv_params())
                          : functional::conv2d(x, weight, none, conv_params());
  }

  [[nodiscard]] Shape infer_shape(const Shape& x) const {
    const Shape b = bias.defined() ? bias.shape() : Shape{};
    return functional::conv2d_fn::infer_shape(conv_params(), x, weight.shape(), bias.defined() ? &b : nullptr);
  }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const {
    return functional::conv2d_fn::infer_dims(conv_params(), x, {to_dims(weight.shape()), weight.shape()}, nullptr);
  }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const {
    const Shape b = bias.defined() ? bias.shape() : Shape{};
    return functional::cost_of<functional::conv2d_fn>(conv_params(), x, weight.shape(), bias.defined() ? &b : nullptr);
  }

  /// F::conv2d's rule, the tensors written as initializers named by `path`.
  void onnx_export(functional::onnx_export_context& cx, const std::string& path) const {
    using functional::onnx_operand;
    std::vector<onnx_operand> in{cx.input(0), onnx_operand::tensor(cx.graph().weight(weight, path + ".weight"), weight.shape())};
    in.push_back(bias.defined() ? onnx_operand::tensor(cx.graph().weight(bias, path + ".bias"), bias.shape()) : onnx_operand{});
    functional::onnx_export_context conv = cx.with(cx.sub_call(std::move(in), cx.output()));
    functional::conv2d_fn::onnx_export(conv, conv_params());
  }

  [[nodiscard]] std::string extra_repr() const override {
    using functional::repr;
    std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                    ", kernel_size=" + repr(kernel_size) + ", stride=" + repr(stride);
    if (padding != functional::pair2{0}) s += ", padding=" + repr(padding);
    if (dilation != functional::pair2{1}) s += ", dilation=" + repr(dilation);
    if (groups != 1) s += ", groups=" + std::to_string(groups);
    if (!bias.defined()) s += ", bias=False";
    return s;
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(Conv2d)

}  // namespace tracemod::nn
