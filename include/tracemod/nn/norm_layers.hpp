// LayerNorm and GroupNorm (PyTorch's nn.LayerNorm and nn.GroupNorm): F::layer_norm and
// F::group_norm with a weight (ones) and bias (zeros) of their own, PyTorch's state_dict keys.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/factories.hpp>
#include <tracemod/functional/layer_norm.hpp>
#include <tracemod/functional/params.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tracemod::nn {

namespace detail {

/// The weight and bias operands of a norm module's ONNX rule, written as initializers named by `path`.
inline std::vector<functional::onnx_operand> norm_operands(functional::onnx_export_context& cx, const std::string& path,
                                                           const Tensor& weight, const Tensor& bias) {
  using functional::onnx_operand;
  std::vector<onnx_operand> in{cx.input(0)};
  for (const auto& [t, name] : {std::pair<const Tensor*, const char*>{&weight, "weight"}, {&bias, "bias"}})
    in.push_back(t->defined() ? onnx_operand::tensor(cx.graph().weight(*t, path + "." + name), t->shape()) : onnx_operand{});
  return in;
}

}  // namespace detail

/// LayerNorm(normalized_shape, eps = 1e-5, elementwise_affine = true): normalises over the trailing
/// dims normalized_shape names.
class LayerNorm : public Module {
 public:
  functional::int_list normalized_shape;
  double eps = 1e-5;
  bool elementwise_affine = true;
  Parameter weight;  ///< normalized_shape, 1 initially; undefined unless elementwise_affine
  Parameter bias;    ///< normalized_shape, 0 initially; undefined unless elementwise_affine

  explicit LayerNorm(const functional::int_list& shape, double epsilon = 1e-5, bool affine = true)
      : normalized_shape(shape), eps(epsilon), elementwise_affine(affine) {
    if (!(epsilon >= 0)) throw value_error("LayerNorm: eps " + functional::repr(epsilon) + " must be non-negative");
    if (affine) {
      weight = ones(dims());
      bias = zeros(dims());
    }
  }
  /// LayerNorm(d): the last axis, of extent d. (One argument only: with an eps beside it,
  /// LayerNorm({3, 4}) could also read as LayerNorm(3, 4.0); write LayerNorm({d}, eps).)
  explicit LayerNorm(std::int64_t d) : LayerNorm(functional::int_list{d}) {}

  TM_BUILTIN_MODULE(LayerNorm, weight, bias)

  [[nodiscard]] Value config() const {
    return Value::dict({{"normalized_shape", functional::to_value(normalized_shape)}, {"eps", eps},
                        {"elementwise_affine", elementwise_affine}});
  }
  /// The LayerNorm a config describes, its tensors at placeholder size (load assigns the saved ones
  /// and checks them against tensor_shapes()).
  static LayerNorm from_config(const Value& c) {
    LayerNorm m(functional::int_list{}, config_field<double>(c, "LayerNorm", "eps"),
                config_field<bool>(c, "LayerNorm", "elementwise_affine"));
    m.normalized_shape = config_field<functional::int_list>(c, "LayerNorm", "normalized_shape");
    for (std::int64_t d : m.normalized_shape)
      if (d < 0) throw value_error("LayerNorm: normalized_shape " + functional::repr(m.normalized_shape) + " has a negative dim");
    return m;
  }
  [[nodiscard]] tensor_shape_list tensor_shapes() const {
    tensor_shape_list v;
    if (weight.defined()) v.emplace_back("weight", dims());
    if (bias.defined()) v.emplace_back("bias", dims());
    return v;
  }

  [[nodiscard]] Tensor forward(const Tensor& x) const {
    return weight.defined() ? functional::layer_norm(x, normalized_shape, weight, bias, eps)
                            : functional::layer_norm(x, normalized_shape, none, none, eps);
  }
  [[nodiscard]] Shape infer_shape(const Shape& x) const {
    const Shape d = dims();
    return functional::layer_norm_fn::infer_shape(params(), x, affine_shape(d), affine_shape(d));
  }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const {
    const Shape d = dims();
    return functional::cost_of<functional::layer_norm_fn>(params(), x, affine_shape(d), affine_shape(d));
  }
  /// F::layer_norm's rule, the tensors written as initializers named by `path`.
  void onnx_export(functional::onnx_export_context& cx, const std::string& path) const {
    functional::onnx_export_context ln = cx.with(cx.sub_call(detail::norm_operands(cx, path, weight, bias), cx.output()));
    functional::layer_norm_fn::onnx_export(ln, params());
  }

  [[nodiscard]] std::string extra_repr() const override {
    return functional::repr(normalized_shape) + ", eps=" + functional::repr(eps) +
           ", elementwise_affine=" + functional::repr(elementwise_affine);
  }

 private:
  [[nodiscard]] Shape dims() const {
    Shape s;
    for (std::int64_t d : normalized_shape) s.push_back(d);
    return s;
  }
  [[nodiscard]] functional::layer_norm_params params() const { return {normalized_shape, eps}; }
  [[nodiscard]] const Shape* affine_shape(const Shape& d) const { return weight.defined() ? &d : nullptr; }
};
TRACEMOD_BUILTIN_MODULE_CODE(LayerNorm)

/// GroupNorm(num_groups, num_channels, eps = 1e-5, affine = true): the channels of (N, C, ...) in
/// num_groups groups, each normalised over its channels and positions.
class GroupNorm : public Module {
 public:
  std::int64_t num_groups = 1;
  std::int64_t num_channels = 0;
  double eps = 1e-5;
  bool affine = true;
  Parameter weight;  ///< (num_channels,), 1 initially; undefined unless affine
  Parameter bias;    ///< (num_channels,), 0 initially; undefined unless affine

  GroupNorm(std::int64_t groups, std::int64_t channels, double epsilon = 1e-5, bool has_affine = true)
      : num_groups(groups), num_channels(channels), eps(epsilon), affine(has_affine) {
    check(groups, channels, epsilon);
    if (has_affine) {
      weight = ones({channels});
      bias = zeros({channels});
    }
  }

  TM_BUILTIN_MODULE(GroupNorm, weight, bias)

  [[nodiscard]] Value config() const {
    return Value::dict({{"num_groups", num_groups}, {"num_channels", num_channels}, {"eps", eps}, {"affine", affine}});
  }
  static GroupNorm from_config(const Value& c) {
    const auto groups = config_field<std::int64_t>(c, "GroupNorm", "num_groups");
    const auto channels = config_field<std::int64_t>(c, "GroupNorm", "num_channels");
    const auto epsilon = config_field<double>(c, "GroupNorm", "eps");
    check(groups, channels, epsilon);
    GroupNorm m(1, 0, epsilon, config_field<bool>(c, "GroupNorm", "affine"));
    m.num_groups = groups;
    m.num_channels = channels;
    return m;
  }
  [[nodiscard]] tensor_shape_list tensor_shapes() const {
    tensor_shape_list v;
    if (weight.defined()) v.emplace_back("weight", Shape{num_channels});
    if (bias.defined()) v.emplace_back("bias", Shape{num_channels});
    return v;
  }

  [[nodiscard]] Tensor forward(const Tensor& x) const {
    check_input(x.shape());
    return weight.defined() ? functional::group_norm(x, num_groups, weight, bias, eps)
                            : functional::group_norm(x, num_groups, none, none, eps);
  }
  [[nodiscard]] Shape infer_shape(const Shape& x) const {
    check_input(x);
    const Shape c{num_channels};
    return functional::group_norm_fn::infer_shape(params(), x, affine_shape(c), affine_shape(c));
  }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const {
    const Shape c{num_channels};
    return functional::cost_of<functional::group_norm_fn>(params(), x, affine_shape(c), affine_shape(c));
  }
  /// F::group_norm's rule, the tensors written as initializers named by `path`.
  void onnx_export(functional::onnx_export_context& cx, const std::string& path) const {
    functional::onnx_export_context gn = cx.with(cx.sub_call(detail::norm_operands(cx, path, weight, bias), cx.output()));
    functional::group_norm_fn::onnx_export(gn, params());
  }

  [[nodiscard]] std::string extra_repr() const override {
    return std::to_string(num_groups) + ", " + std::to_string(num_channels) + ", eps=" + functional::repr(eps) +
           ", affine=" + functional::repr(affine);
  }

 private:
  static void check(std::int64_t groups, std::int64_t channels, double epsilon) {
    if (groups <= 0 || channels < 0 || channels % groups != 0)
      throw value_error("GroupNorm: num_channels " + std::to_string(channels) + " must divide into num_groups " +
                        std::to_string(groups) + " (a positive count)");
    if (!(epsilon >= 0)) throw value_error("GroupNorm: eps " + functional::repr(epsilon) + " must be non-negative");
  }
  void check_input(const Shape& x) const {
    if (x.rank() < 2 || x[1] != num_channels)
      throw shape_error("expected an input (N, " + std::to_string(num_channels) + ", ...) for " +
                        std::to_string(num_groups) + " groups of " + std::to_string(num_channels) + " channels, got " +
                        x.to_string());
  }
  [[nodiscard]] functional::group_norm_params params() const { return {num_groups, eps}; }
  [[nodiscard]] const Shape* affine_shape(const Shape& c) const { return weight.defined() ? &c : nullptr; }
};
TRACEMOD_BUILTIN_MODULE_CODE(GroupNorm)

}  // namespace tracemod::nn
