// M::FakeQuantize: an observer and the fake quantization it drives, as PyTorch's
// torch.ao.quantization.FakeQuantize: forward observes its input (while observer_enabled), then
// fake-quantizes it with the observer's current qparams (while fake_quant_enabled), else passes it
// through. A builtin module, as MegEngine's FakeQuantize in a TracedModule: traced, it is one call
// (`fq_out = fq(x, )`) that the interpreter runs, observing as the eager module does; its config is
// its observer's spec, the flags and what the observer has seen, so a saved module loads calibrated.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/functional/fake_quantize.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/quant/observer.hpp>
#include <tracemod/quant/observer_spec.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod::nn {

class FakeQuantize : public Module {
 public:
  bool observer_enabled = true;
  bool fake_quant_enabled = true;

  explicit FakeQuantize(std::unique_ptr<quant::Observer> observer) : observer_(std::move(observer)) {
    if (!observer_) throw value_error("FakeQuantize: no observer");
  }
  FakeQuantize(const FakeQuantize& o)
      : Module(o), observer_enabled(o.observer_enabled), fake_quant_enabled(o.fake_quant_enabled),
        observer_(o.observer_->clone()) {}
  FakeQuantize& operator=(const FakeQuantize&) = delete;

  TM_BUILTIN_MODULE(FakeQuantize)

  [[nodiscard]] Value config() const {
    const quant::ObserverSpec spec = quant::spec_of(*observer_);
    const quant::QScheme& q = spec.scheme;
    ValueList state;
    for (const float v : observer_->state()) state.emplace_back(v);
    return Value::dict({{"observer", observer_->name()}, {"dtype", q.dtype.name}, {"quant_min", q.dtype.quant_min},
                        {"quant_max", q.dtype.quant_max}, {"signed", q.dtype.is_signed},
                        {"symmetric", q.mode == quant::QMode::symmetric}, {"per_channel", q.per_channel},
                        {"axis", q.axis}, {"averaging_constant", spec.averaging_constant}, {"bins", spec.bins},
                        {"upsample_rate", spec.upsample_rate}, {"observer_enabled", observer_enabled},
                        {"fake_quant_enabled", fake_quant_enabled}, {"state", Value::list(std::move(state))}});
  }
  static FakeQuantize from_config(const Value& c) {
    constexpr std::string_view who = "FakeQuantize";
    quant::ObserverSpec spec{
        .kind = quant::observer_kind(config_field<std::string>(c, who, "observer"), "FakeQuantize"),
        .scheme = {.dtype = {config_field<std::string>(c, who, "dtype"), config_field<std::int64_t>(c, who, "quant_min"),
                             config_field<std::int64_t>(c, who, "quant_max"), config_field<bool>(c, who, "signed")},
                   .mode = config_field<bool>(c, who, "symmetric") ? quant::QMode::symmetric : quant::QMode::affine,
                   .per_channel = config_field<bool>(c, who, "per_channel"),
                   .axis = config_field<std::int64_t>(c, who, "axis")},
        .averaging_constant = static_cast<float>(config_entry(c, who, "averaging_constant").number()),
        .bins = config_field<std::int64_t>(c, who, "bins"),
        .upsample_rate = config_field<std::int64_t>(c, who, "upsample_rate")};
    FakeQuantize f(spec.make());
    f.observer_enabled = config_field<bool>(c, who, "observer_enabled");
    f.fake_quant_enabled = config_field<bool>(c, who, "fake_quant_enabled");
    std::vector<float> state;
    for (const Value& v : config_entry(c, who, "state").items()) state.push_back(static_cast<float>(v.number()));
    f.observer_->set_state(state);
    return f;
  }

  [[nodiscard]] const quant::Observer& observer() const noexcept { return *observer_; }
  [[nodiscard]] quant::Observer& observer() noexcept { return *observer_; }
  void enable_observer(bool on = true) { observer_enabled = on; }
  void disable_observer() { observer_enabled = false; }
  void enable_fake_quant(bool on = true) { fake_quant_enabled = on; }
  void disable_fake_quant() { fake_quant_enabled = false; }
  /// The observer's qparams: (C,) tensors per channel, (1,) per tensor.
  [[nodiscard]] quant::QParamsTensors calculate_qparams() const {
    const std::lock_guard lock(mutex_);
    return observer_->calculate_qparams();
  }

  /// Observes x (while observer_enabled) and fake-quantizes it (while fake_quant_enabled).
  [[nodiscard]] Tensor forward(const Tensor& x) const {
    const std::lock_guard lock(mutex_);
    if (observer_enabled) observer_->observe(x);
    if (!fake_quant_enabled) return x;
    return quantize(x, observer_->calculate_qparams());
  }
  [[nodiscard]] Shape infer_shape(const Shape& x) const { return x; }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const { return x.dims; }

  /// The fake_quantize op's rule with the qparams observed so far (Identity while fake quantization
  /// is off); the per-channel scales and zero points are initializers named by `path`.
  void onnx_export(functional::onnx_export_context& cx, const std::string& path) const {
    if (!fake_quant_enabled) return cx.node("Identity", {cx.input(0).name}, {cx.output()});
    const quant::QParamsTensors q = calculate_qparams();
    const quant::QScheme& s = observer_->scheme();
    if (!s.per_channel)
      return functional::fake_quantize_fn::onnx_export(cx, {q.scale.data<float>()[0], q.zero_point.data<std::int32_t>()[0],
                                                            s.dtype.quant_min, s.dtype.quant_max});
    using functional::onnx_operand;
    std::vector<onnx_operand> in{cx.input(0),
                                 onnx_operand::tensor(cx.graph().weight(q.scale, path + ".scale"), q.scale.shape()),
                                 onnx_operand::tensor(cx.graph().weight(q.zero_point, path + ".zero_point"),
                                                      q.zero_point.shape())};
    functional::onnx_export_context sub = cx.with(cx.sub_call(std::move(in), cx.output()));
    functional::fake_quantize_per_channel_fn::onnx_export(sub, {s.axis, s.dtype.quant_min, s.dtype.quant_max});
  }

 private:
  [[nodiscard]] Tensor quantize(const Tensor& x, const quant::QParamsTensors& q) const {
    const quant::QScheme& s = observer_->scheme();
    if (s.per_channel)
      return functional::fake_quantize_per_channel(x, q.scale, q.zero_point, s.axis, s.dtype.quant_min, s.dtype.quant_max);
    return functional::fake_quantize(x, static_cast<double>(q.scale.data<float>()[0]),
                                     static_cast<std::int64_t>(q.zero_point.data<std::int32_t>()[0]),
                                     s.dtype.quant_min, s.dtype.quant_max);
  }

  std::unique_ptr<quant::Observer> observer_;
  mutable std::mutex mutex_;  // forward updates the observer: one call at a time
};
TRACEMOD_BUILTIN_MODULE_CODE(FakeQuantize)

}  // namespace tracemod::nn
