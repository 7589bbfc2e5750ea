// QConfig: which observer watches a layer's weight and its activation, and whether each is fake
// quantized, as MegEngine's megengine.quantization.QConfig; with MegEngine's presets:
//   min_max_fakequant_qconfig  weight MinMax qint8_narrow, activation MinMax qint8, both fake quantized
//   ema_fakequant_qconfig      weight MinMax qint8_narrow, activation moving average qint8
//                              (MegEngine's momentum 0.9: averaging_constant 0.1), both fake quantized
//   calibration_qconfig        weight MinMax qint8_narrow, activation Histogram qint8, observed only
// All symmetric and per tensor, as MegEngine's observers default to.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/quant/fake_quantize.hpp>
#include <tracemod/quant/observer.hpp>
#include <tracemod/quant/observer_histogram.hpp>
#include <tracemod/quant/observer_spec.hpp>
#include <tracemod/quant/qscheme.hpp>

#include <cstdint>
#include <memory>

namespace tracemod::quant {

/// A layer's quantization: the observers of its weight and activation, and whether each is fake
/// quantized (QAT) or only observed (calibration).
struct QConfig {
  ObserverSpec weight_observer;
  ObserverSpec act_observer;
  bool weight_fake_quant = true;
  bool act_fake_quant = true;

  /// The FakeQuantize module of a weight (fake quantization off when the config only observes).
  [[nodiscard]] nn::FakeQuantize weight() const { return make(weight_observer, weight_fake_quant); }
  /// The FakeQuantize module of an activation.
  [[nodiscard]] nn::FakeQuantize activation() const { return make(act_observer, act_fake_quant); }

 private:
  static nn::FakeQuantize make(const ObserverSpec& spec, bool fake_quant) {
    nn::FakeQuantize f(spec.make());
    f.fake_quant_enabled = fake_quant;
    return f;
  }
};

namespace detail {
inline QScheme symmetric(QuantDType d) { return {.dtype = std::move(d), .mode = QMode::symmetric}; }
}  // namespace detail

inline const QConfig min_max_fakequant_qconfig{
    .weight_observer = {.kind = ObserverKind::min_max, .scheme = detail::symmetric(QuantDType::qint8_narrow())},
    .act_observer = {.kind = ObserverKind::min_max, .scheme = detail::symmetric(QuantDType::qint8())}};

inline const QConfig ema_fakequant_qconfig{
    .weight_observer = {.kind = ObserverKind::min_max, .scheme = detail::symmetric(QuantDType::qint8_narrow())},
    .act_observer = {.kind = ObserverKind::moving_average_min_max,
                     .scheme = detail::symmetric(QuantDType::qint8()),
                     .averaging_constant = 0.1f}};

inline const QConfig calibration_qconfig{
    .weight_observer = {.kind = ObserverKind::min_max, .scheme = detail::symmetric(QuantDType::qint8_narrow())},
    .act_observer = {.kind = ObserverKind::histogram, .scheme = detail::symmetric(QuantDType::qint8())},
    .weight_fake_quant = false,
    .act_fake_quant = false};

}  // namespace tracemod::quant
