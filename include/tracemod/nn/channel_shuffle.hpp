// ChannelShuffle: PyTorch's nn.ChannelShuffle (ShuffleNet's channel shuffle). The C channels of
// (N, C, *) are split into `groups` groups of C / groups; output channel j * groups + g is input
// channel g * (C / groups) + j. Computed as reshape (N, groups, C / groups, -1), transpose of the two
// group axes, reshape back. A builtin: it keeps its input's shape, so it states its symbolic shape
// exactly and traces with any axis but C dynamic.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/shape_ops.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <cstdint>
#include <string>

namespace tracemod::nn {

/// ChannelShuffle(groups): groups must divide the channels (axis 1) of the input.
class ChannelShuffle : public Module {
 public:
  std::int64_t groups = 1;

  explicit ChannelShuffle(std::int64_t g) : groups(g) {
    if (g <= 0) throw value_error("ChannelShuffle: groups " + std::to_string(g) + " must be positive");
  }

  TM_BUILTIN_MODULE(ChannelShuffle)

  [[nodiscard]] Value config() const { return Value::dict({{"groups", groups}}); }
  static ChannelShuffle from_config(const Value& c) {
    return ChannelShuffle(config_field<std::int64_t>(c, "ChannelShuffle", "groups"));
  }
  /// A permutation of channels: it commutes with any scaling of its input.
  static constexpr functional::scale_rule scaling = functional::scale_rule::linear;

  [[nodiscard]] Tensor forward(const Tensor& x) const {
    const Shape s = infer_shape(x.shape());
    const std::int64_t c = s[1], n = s[0];
    const std::int64_t rest = c == 0 || n == 0 ? 0 : x.numel() / (n * c);
    const Tensor grouped = functional::reshape(x, {n, groups, c / groups, rest});
    const Tensor swapped = functional::transpose(grouped, {0, 2, 1, 3});
    functional::int_list back;
    for (std::int64_t d : s) back.push_back(d);
    return functional::reshape(swapped, back);
  }
  [[nodiscard]] Shape infer_shape(const Shape& x) const {
    if (x.rank() < 2)
      throw shape_error("ChannelShuffle: input " + x.to_string() + " must have rank >= 2 (N, C, *)");
    if (x[1] % groups != 0)
      throw shape_error("ChannelShuffle: the " + std::to_string(x[1]) + " channels of input " + x.to_string() +
                        " do not divide into groups " + std::to_string(groups));
    return x;
  }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  /// No arithmetic: the input is read and the output written once.
  [[nodiscard]] functional::op_cost cost(const Shape& x) const { return {0, 0, 4 * x.numel(), 4 * x.numel()}; }

  /// Reshape (0, groups, C / groups, -1), Transpose (0, 2, 1, 3), Reshape to Shape(x): every axis
  /// but C is read from the input, so dynamic axes stay dynamic.
  void onnx_export(functional::onnx_export_context& cx, const std::string&) const {
    const Shape& x = cx.input(0).shape;
    const std::string out = cx.output();
    const std::string grouped =
        cx.node1("Reshape", {cx.input(0).name, cx.graph().ints({0, groups, x[1] / groups, -1}, "shuffle_shape")},
                 cx.fresh(out + "_grouped"));
    const std::string swapped =
        cx.node1("Transpose", {grouped}, cx.fresh(out + "_swapped"), {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
    const std::string shape = cx.node1("Shape", {cx.input(0).name}, cx.fresh(out + "_shape"));
    cx.node("Reshape", {swapped, shape}, {out});
  }

  [[nodiscard]] std::string extra_repr() const override { return "groups=" + std::to_string(groups); }
};
TRACEMOD_BUILTIN_MODULE_CODE(ChannelShuffle)

}  // namespace tracemod::nn
