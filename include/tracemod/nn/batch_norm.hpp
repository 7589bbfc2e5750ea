// BatchNorm2d (PyTorch's nn.BatchNorm2d: momentum is the weight of the new batch statistic; buffers
// running_mean, running_var, num_batches_tracked, so a torchvision state_dict maps 1:1).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/factories.hpp>
#include <tracemod/functional/normalization.hpp>
#include <tracemod/functional/params.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tracemod::nn {

/// BatchNorm2d's keyword arguments. momentum = std::nullopt averages all batches seen so far
/// (PyTorch's cumulative moving average, driven by num_batches_tracked).
struct BatchNorm2dOptions {
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;
};

class BatchNorm2d : public Module {
 public:
  std::int64_t num_features = 0;
  double eps = 1e-5;
  std::optional<double> momentum;
  bool affine = true;
  bool track_running_stats = true;
  Parameter weight;            ///< (C,), 1 initially; undefined unless affine
  Parameter bias;              ///< (C,), 0 initially; undefined unless affine
  Buffer running_mean;         ///< (C,), 0 initially; undefined unless track_running_stats
  Buffer running_var;          ///< (C,), 1 initially; undefined unless track_running_stats
  Buffer num_batches_tracked;  ///< int32 scalar; undefined unless track_running_stats

  explicit BatchNorm2d(std::int64_t features, const BatchNorm2dOptions& o = {})
      : num_features(features), eps(o.eps), momentum(o.momentum), affine(o.affine),
        track_running_stats(o.track_running_stats) {
    if (features < 0) throw value_error("BatchNorm2d: num_features " + std::to_string(features) + " is negative");
    if (!(o.eps > 0)) throw value_error("BatchNorm2d: eps " + functional::repr(o.eps) + " must be positive");
    if (o.affine) {
      weight = ones({features});
      bias = zeros({features});
    }
    if (o.track_running_stats) {
      running_mean = zeros({features});
      running_var = ones({features});
      num_batches_tracked = zeros(Shape{}, DType::int32);
    }
  }

  TM_BUILTIN_MODULE(BatchNorm2d, weight, bias, running_mean, running_var, num_batches_tracked)

  [[nodiscard]] Value config() const {
    return Value::dict({{"num_features", num_features}, {"eps", eps},
                        {"momentum", momentum ? Value(*momentum) : Value(none)}, {"affine", affine},
                        {"track_running_stats", track_running_stats}});
  }
  /// The BatchNorm2d a config describes, its tensors at placeholder size (load assigns the saved
  /// ones and checks them against tensor_shapes()).
  static BatchNorm2d from_config(const Value& c) {
    const auto features = config_field<std::int64_t>(c, "BatchNorm2d", "num_features");
    BatchNorm2d m(0, {.eps = config_field<double>(c, "BatchNorm2d", "eps"),
                      .momentum = config_field<std::optional<double>>(c, "BatchNorm2d", "momentum"),
                      .affine = config_field<bool>(c, "BatchNorm2d", "affine"),
                      .track_running_stats = config_field<bool>(c, "BatchNorm2d", "track_running_stats")});
    if (features < 0) throw value_error("BatchNorm2d: num_features " + std::to_string(features) + " is negative");
    m.num_features = features;
    return m;
  }
  [[nodiscard]] tensor_shape_list tensor_shapes() const {
    tensor_shape_list v;
    if (weight.defined()) v.emplace_back("weight", Shape{num_features});
    if (bias.defined()) v.emplace_back("bias", Shape{num_features});
    if (running_mean.defined()) v.emplace_back("running_mean", Shape{num_features});
    if (running_var.defined()) v.emplace_back("running_var", Shape{num_features});
    if (num_batches_tracked.defined()) v.emplace_back("num_batches_tracked", Shape{});
    return v;
  }

  /// Training mode normalises with the batch statistics and updates the running ones; eval mode uses
  /// the running statistics (or the batch ones when they are not tracked).
  [[nodiscard]] Tensor forward(const Tensor& x) const {
    functional::require_defined("BatchNorm2d", "input", x);
    check_input(x.shape());
    double factor = momentum.value_or(0.0);
    const bool update = training() && running_mean.defined();
    std::int32_t* count = nullptr;
    if (update) {
      // Everything that can fail is checked before any state changes: a failing call counts no batch.
      Tensor counter = num_batches_tracked;  // a handle: the module's counter is updated
      if (counter.dtype() != DType::int32 || counter.numel() != 1)
        throw dtype_error("BatchNorm2d: num_batches_tracked is a " + std::string(dtype_name(counter.dtype())) +
                          " tensor of shape " + counter.shape().to_string() + "; it must be one int32 value");
      count = counter.data<std::int32_t>();
      if (!momentum) factor = 1.0 / (static_cast<double>(*count) + 1.0);
    }
    const functional::batch_norm_fn::params p{training() || !running_mean.defined(), factor, eps};
    const auto normalize = [&](const auto& mean, const auto& var) {
      return weight.defined() ? functional::batch_norm(x, mean, var, weight, bias, p)
                              : functional::batch_norm(x, mean, var, none, none, p);
    };
    Tensor y = running_mean.defined() ? normalize(running_mean, running_var) : normalize(none, none);
    if (count != nullptr && *count < std::numeric_limits<std::int32_t>::max()) ++*count;  // saturates, never wraps
    return y;
  }

  [[nodiscard]] Shape infer_shape(const Shape& x) const {
    check_input(x);
    return x;
  }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }
  /// F::batch_norm's cost for the call forward makes.
  [[nodiscard]] functional::op_cost cost(const Shape& x) const {
    check_input(x);
    const functional::batch_norm_fn::params p{training() || !running_mean.defined(), 0.0, eps};
    const Shape c{x[1]};
    const Shape* stat = running_mean.defined() ? &c : nullptr;
    const Shape* affine = weight.defined() ? &c : nullptr;
    return functional::cost_of<functional::batch_norm_fn>(p, x, stat, stat, affine, affine);
  }

  /// F::batch_norm's rule in eval mode, the tensors written as initializers named by `path`.
  void onnx_export(functional::onnx_export_context& cx, const std::string& path) const {
    using functional::onnx_operand;
    if (training()) cx.refuse("BatchNorm2d '" + path + "' is in training mode; call eval() before exporting");
    std::vector<onnx_operand> in{cx.input(0)};
    using named = std::pair<const Tensor*, const char*>;
    for (const auto& [t, name] : {named{&running_mean, "running_mean"}, named{&running_var, "running_var"},
                                  named{&weight, "weight"}, named{&bias, "bias"}})
      in.push_back(t->defined() ? onnx_operand::tensor(cx.graph().weight(*t, path + "." + name), t->shape()) : onnx_operand{});
    functional::onnx_export_context bn = cx.with(cx.sub_call(std::move(in), cx.output()));
    functional::batch_norm_fn::onnx_export(bn, {.training = false, .momentum = momentum.value_or(0.1), .eps = eps});
  }

  [[nodiscard]] std::string extra_repr() const override {
    using functional::repr;
    return std::to_string(num_features) + ", eps=" + repr(eps) + ", momentum=" + repr(momentum) +
           ", affine=" + repr(affine) + ", track_running_stats=" + repr(track_running_stats);
  }

 private:
  void check_input(const Shape& x) const {
    if (x.rank() != 4)
      throw shape_error("BatchNorm2d: expected a 4-D input (N, C, H, W), got " + x.to_string());
    if (x[1] != num_features)
      throw shape_error("BatchNorm2d(" + std::to_string(num_features) + "): input " + x.to_string() + " has " +
                        std::to_string(x[1]) + " channels");
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(BatchNorm2d)

}  // namespace tracemod::nn
