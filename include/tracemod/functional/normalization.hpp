// batch_norm: inference with running statistics, or training with batch statistics (which also
// updates the running statistics in place, through the buffers they share with their module).
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/batch_norm.hpp>

#include <array>
#include <string>
#include <tuple>

namespace tracemod::functional {

/// momentum follows PyTorch: the weight of the batch statistic in the running average.
struct batch_norm_params {
  bool training = false;
  double momentum = 0.1;
  double eps = 1e-5;
};

struct batch_norm_fn : op_base<batch_norm_fn> {
  static constexpr std::string_view name = "batch_norm";
  static constexpr std::string_view target = "nn.batch_norm";
  static constexpr bool foldable = false;  // training mode updates the running statistics in place
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{
      operand{"inp", operand_kind::tensor}, operand{"running_mean", operand_kind::optional_tensor},
      operand{"running_var", operand_kind::optional_tensor}, operand{"weight", operand_kind::optional_tensor},
      operand{"bias", operand_kind::optional_tensor}};
  using params = batch_norm_params;
  static constexpr std::tuple fields{keyword("training", &params::training), keyword("momentum", &params::momentum),
                                     keyword("eps", &params::eps)};

  /// Input (N, C, ...) of rank >= 2; every present statistic/affine operand is (C,).
  static Dims infer_dims(const params&, const ShapeDims& x, const ShapeDims*, const ShapeDims*, const ShapeDims*,
                         const ShapeDims*) {
    return x.dims;
  }
  static constexpr Shape infer_shape(const params& p, const Shape& x, const Shape* mean, const Shape* var,
                                     const Shape* weight, const Shape* bias) {
    if (!(p.eps >= 0))  // also rejects NaN
      throw value_error(std::string(target) + ": eps " + repr(p.eps) + " must be non-negative");
    if (x.rank() < 2)
      throw shape_error(std::string(target) + ": input " + x.to_string() + " must have rank >= 2 (N, C, ...)");
    const std::array<std::pair<std::string_view, const Shape*>, 4> per_channel{
        {{"running_mean", mean}, {"running_var", var}, {"weight", weight}, {"bias", bias}}};
    for (const auto& [arg, s] : per_channel)
      if (s && !(s->rank() == 1 && (*s)[0] == x[1]))
        throw shape_error(std::string(target) + ": " + std::string(arg) + " " + s->to_string() + " must be (" +
                          std::to_string(x[1]) + ",) for input " + x.to_string());
    if (!p.training && (!mean || !var))
      throw value_error(std::string(target) + ": inference (training=False) needs running_mean and running_var");
    if ((mean == nullptr) != (var == nullptr))
      throw value_error(std::string(target) + ": running_mean and running_var must be given together");
    if (p.training && x.numel() > 0 && x.numel() == x[1])
      throw value_error(std::string(target) + ": expected more than 1 value per channel when training, got input " +
                        x.to_string());
    return x;
  }

  /// Inference: one multiply-add per element (the folded scale and shift). Training also computes
  /// the batch mean and variance: two more operations per element.
  static constexpr op_cost cost(const params& p, const Shape& out, const Shape&, const Shape*, const Shape*,
                                const Shape*, const Shape*) {
    return flop_cost((p.training ? 3 : 1) * out.numel());
  }

  template <class M, class V, class W, class B>
  static Tensor eager(const params& p, const Tensor& x, const M& mean, const V& var, const W& weight, const B& bias) {
    const auto ptr = [&](const auto& t, std::string_view arg) -> const Tensor* {
      if constexpr (std::same_as<std::remove_cvref_t<decltype(t)>, none_t>) {
        return nullptr;
      } else {
        require_float32(target, arg, t);
        return &t;
      }
    };
    require_float32(target, "inp", x);
    const Tensor* tm = ptr(mean, "running_mean");
    const Tensor* tv = ptr(var, "running_var");
    const Tensor* tw = ptr(weight, "weight");
    const Tensor* tb = ptr(bias, "bias");
    const auto shape_of = [](const Tensor* t) { return t ? t->shape() : Shape{}; };
    const Shape sm = shape_of(tm), sv = shape_of(tv), sw = shape_of(tw), sb = shape_of(tb);
    infer_shape(p, x.shape(), tm ? &sm : nullptr, tv ? &sv : nullptr, tw ? &sw : nullptr, tb ? &sb : nullptr);
    const auto n = static_cast<std::size_t>(x.size(0)), c = static_cast<std::size_t>(x.size(1));
    const auto s = c == 0 || n == 0 ? std::size_t{0} : static_cast<std::size_t>(x.numel()) / (n * c);
    const auto data = [](const Tensor* t) { return t ? t->data<float>() : nullptr; };
    Tensor y = Tensor::empty(x.shape(), DType::float32, target);
    if (p.training) {
      // Running statistics are updated in place: they are buffers shared with the owning module.
      auto mutable_data = [](const Tensor* t) { return t ? Tensor(*t).data<float>() : nullptr; };
      kernels::batch_norm_training(x.data<float>(), y.data<float>(), n, c, s, data(tw), data(tb), mutable_data(tm),
                                   mutable_data(tv), static_cast<float>(p.momentum), static_cast<float>(p.eps));
    } else {
      kernels::batch_norm_inference(x.data<float>(), y.data<float>(), n, c, s, data(tm), data(tv), data(tw), data(tb),
                                    static_cast<float>(p.eps));
    }
    return y;
  }

  template <class X, class M = none_t, class V = none_t, class W = none_t, class B = none_t>
  decltype(auto) operator()(const X& x, const M& running_mean, const V& running_var, const W& weight = none,
                            const B& bias = none, const params& p = {}) const {
    return apply(p, x, running_mean, running_var, weight, bias);
  }

  /// Inference batch norm; PyTorch's momentum m is ONNX's 1 - m (the weight of the running value).
  static void onnx_export(onnx_export_context& cx, const params& p) {
    if (p.training)
      cx.refuse("batch norm in training mode (batch statistics) has no ONNX inference equivalent; call eval() first");
    if (!cx.input(1).is_tensor() || !cx.input(2).is_tensor()) cx.refuse("batch norm without running statistics");
    const std::int64_t channels = cx.input(0).shape[1];
    const std::string scale = cx.input(3).is_tensor() ? cx.input(3).name : cx.graph().filled(1.0, channels);
    const std::string shift = cx.input(4).is_tensor() ? cx.input(4).name : cx.graph().filled(0.0, channels);
    cx.node("BatchNormalization", {cx.input(0).name, scale, shift, cx.input(1).name, cx.input(2).name}, {cx.output()},
            {{"epsilon", p.eps}, {"momentum", 1.0 - p.momentum}});
  }
  static constexpr std::array onnx_import_types{std::string_view("BatchNormalization")};
  // spatial, is_test and consumed_inputs are attributes of old opsets that change nothing here.
  static constexpr std::array onnx_import_attributes{std::string_view("epsilon"),  std::string_view("momentum"),
                                                     std::string_view("training_mode"), std::string_view("spatial"),
                                                     std::string_view("is_test"), std::string_view("consumed_inputs")};
  static void onnx_import(onnx_import_context& cx) {
    if (cx.attr_int("training_mode", 0) != 0) cx.unsupported("attribute training_mode=1 (batch statistics)");
    if (cx.attr_int("spatial", 1) != 1) cx.unsupported("attribute spatial=0");
    cx.only_first_output("running statistics of training mode");
    cx.bind(cx.call<batch_norm_fn>({.training = false, .momentum = 0.1, .eps = cx.attr_float("epsilon", 1e-5f)},
                                   cx.tensor(0), cx.tensor(3), cx.tensor(4), cx.tensor(1), cx.tensor(2)));
  }
};
inline constexpr batch_norm_fn batch_norm{};
TRACEMOD_REGISTER_BUILTIN_OP(batch_norm_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
