// M::FakeQuantize: an observer and the fake quantization it drives, as PyTorch's
// torch.ao.quantization.FakeQuantize: forward observes its input (while observer_enabled), then
// fake-quantizes it with the observer's current qparams (while fake_quant_enabled), else passes it
// through. Traced, it records the fake quantization with the qparams it holds then, as constants
// (MegEngine's TracedModule freezes a QAT module's fake quant the same way).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/functional/fake_quantize.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/quant/observer.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

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

  TM_MODULE(FakeQuantize)

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

  /// Observes x (a concrete tensor) and fake-quantizes it; a symbolic x records the fake
  /// quantization with the qparams observed so far.
  template <class X>
  auto forward(const X& x) const {
    if constexpr (std::derived_from<X, Tensor>) {
      const std::lock_guard lock(mutex_);
      if (observer_enabled) observer_->observe(x);
      if (!fake_quant_enabled) return Tensor(x);
      return quantize(x, observer_->calculate_qparams());
    } else {
      if (!fake_quant_enabled) return x;
      return quantize(x, calculate_qparams());
    }
  }

 private:
  template <class X>
  auto quantize(const X& x, const quant::QParamsTensors& q) const {
    const quant::QScheme& s = observer_->scheme();
    if (s.per_channel)
      return functional::fake_quantize_per_channel(x, q.scale, q.zero_point, s.axis, s.dtype.quant_min, s.dtype.quant_max);
    return functional::fake_quantize(x, static_cast<double>(q.scale.template data<float>()[0]),
                                     static_cast<std::int64_t>(q.zero_point.template data<std::int32_t>()[0]),
                                     s.dtype.quant_min, s.dtype.quant_max);
  }

  std::unique_ptr<quant::Observer> observer_;
  mutable std::mutex mutex_;  // forward updates the observer: one call at a time
};

}  // namespace tracemod::nn
