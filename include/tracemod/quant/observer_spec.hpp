// ObserverSpec: an observer to make (its kind, scheme and hyper-parameters), and the spec of an
// existing observer; M::FakeQuantize saves its observer as a spec plus the observer's state().
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/quant/observer.hpp>
#include <tracemod/quant/observer_histogram.hpp>
#include <tracemod/quant/qscheme.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace tracemod::quant {

enum class ObserverKind : std::uint8_t { min_max, moving_average_min_max, per_channel_min_max, histogram };

/// An observer to make: its kind, scheme and (for the moving average) averaging constant, (for the
/// histogram) bins and upsample rate.
struct ObserverSpec {
  ObserverKind kind = ObserverKind::min_max;
  QScheme scheme{};
  float averaging_constant = 0.01f;
  std::int64_t bins = 2048;
  std::int64_t upsample_rate = 128;

  [[nodiscard]] std::unique_ptr<Observer> make() const {
    switch (kind) {
      case ObserverKind::min_max: return std::make_unique<MinMaxObserver>(scheme);
      case ObserverKind::moving_average_min_max: return std::make_unique<MovingAverageMinMaxObserver>(scheme, averaging_constant);
      case ObserverKind::per_channel_min_max: return std::make_unique<PerChannelMinMaxObserver>(scheme);
      case ObserverKind::histogram: return std::make_unique<HistogramObserver>(scheme, bins, upsample_rate);
    }
    throw value_error("ObserverSpec: unknown observer kind");
  }
};

/// The observer's class name for a kind ("MinMaxObserver"), as Observer::name() states it.
[[nodiscard]] inline std::string observer_kind_name(ObserverKind k) {
  switch (k) {
    case ObserverKind::min_max: return "MinMaxObserver";
    case ObserverKind::moving_average_min_max: return "MovingAverageMinMaxObserver";
    case ObserverKind::per_channel_min_max: return "PerChannelMinMaxObserver";
    case ObserverKind::histogram: return "HistogramObserver";
  }
  return "?";
}

/// The kind an observer class name stands for; value_error naming `who` for an unknown name.
[[nodiscard]] inline ObserverKind observer_kind(const std::string& name, const std::string& who) {
  for (const ObserverKind k : {ObserverKind::min_max, ObserverKind::moving_average_min_max,
                               ObserverKind::per_channel_min_max, ObserverKind::histogram})
    if (observer_kind_name(k) == name) return k;
  throw value_error(who + ": unknown observer '" + name + "'");
}

/// The spec that makes an observer like `o` (without its state).
[[nodiscard]] inline ObserverSpec spec_of(const Observer& o) {
  ObserverSpec s{.kind = observer_kind(o.name(), "spec_of"), .scheme = o.scheme()};
  if (const auto* m = dynamic_cast<const MovingAverageMinMaxObserver*>(&o)) s.averaging_constant = m->averaging_constant();
  if (const auto* h = dynamic_cast<const HistogramObserver*>(&o)) {
    s.bins = h->bins();
    s.upsample_rate = h->upsample_rate();
  }
  return s;
}

}  // namespace tracemod::quant
