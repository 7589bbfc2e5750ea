// Observers: they watch the float32 tensors a model computes and state the qparams that would
// quantize them, as PyTorch 1.13's torch.ao.quantization observers (MegEngine's observers follow the
// same definitions; docs/quantization.md lists where they differ).
//   MinMaxObserver                the running minimum and maximum of everything observed
//   MovingAverageMinMaxObserver   min += c * (batch_min - min) (and max alike), c = 0.01 by default;
//                                 the first batch sets them directly
//   PerChannelMinMaxObserver      running minimum and maximum per index of the channel axis
//   HistogramObserver             (observer_histogram.hpp) a 2048-bin histogram and an L2 search
// observe(x) updates the state (an empty tensor changes nothing), qparams() states the scale and zero
// point (quant/qscheme.hpp), reset() forgets everything. qparams() before any observation, a NaN in
// the input and a tensor that is not float32 are value_errors naming the observer; a failing call
// leaves the state as it was.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/quant/qscheme.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tracemod::quant {

/// Per-channel qparams (or per-tensor ones as one channel): scale float32 (C,), zero_point int32 (C,).
struct QParamsTensors {
  Tensor scale;
  Tensor zero_point;
};

namespace detail {

/// The minimum and maximum of n floats; throws value_error naming `who` on a NaN.
inline std::pair<float, float> min_max(const float* x, std::size_t n, const std::string& who) {
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) throw value_error(who + ": the observed tensor holds NaN at element " + std::to_string(i));
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  return {lo, hi};
}

inline void require_observable(const std::string& who, const Tensor& x) {
  if (!x.defined()) throw value_error(who + ": observe() got an undefined tensor");
  if (x.dtype() != DType::float32)
    throw value_error(who + ": observe() got a " + std::string(dtype_name(x.dtype())) + " tensor of shape " +
                      x.shape().to_string() + "; observers watch float32 tensors");
}

/// a + c * (b - a) in float32, each step rounded as PyTorch's tensor ops round it: no fused
/// multiply-add, which compilers otherwise form from this expression.
inline float moving_average(float a, float b, float c) {
  volatile float step = c * (b - a);
  return a + step;
}

/// Scales and zero points as (n,)-shaped tensors, one element per channel.
inline QParamsTensors as_tensors(const std::vector<ScaleZeroPoint>& q) {
  const auto n = static_cast<std::int64_t>(q.size());
  QParamsTensors t{Tensor::empty(Shape{n}, DType::float32, "observer"), Tensor::empty(Shape{n}, DType::int32, "observer")};
  for (std::size_t i = 0; i < q.size(); ++i) {
    t.scale.data<float>()[i] = q[i].scale;
    t.zero_point.data<std::int32_t>()[i] = q[i].zero_point;
  }
  return t;
}

}  // namespace detail

/// What every observer offers: observe, the qparams as tensors, reset, a copy.
class Observer {
 public:
  explicit Observer(QScheme scheme) : scheme_(std::move(scheme)) {}
  Observer(const Observer&) = default;
  Observer& operator=(const Observer&) = default;
  virtual ~Observer() = default;

  [[nodiscard]] const QScheme& scheme() const noexcept { return scheme_; }
  /// The class name ("MinMaxObserver"), for messages.
  [[nodiscard]] virtual std::string name() const = 0;
  virtual void observe(const Tensor& x) = 0;
  /// Whether anything was observed since construction or reset().
  [[nodiscard]] virtual bool observed() const noexcept = 0;
  /// The qparams as tensors: (C,) for a per-channel scheme, (1,) otherwise (PyTorch's calculate_qparams).
  [[nodiscard]] virtual QParamsTensors calculate_qparams() const = 0;
  virtual void reset() = 0;
  [[nodiscard]] virtual std::unique_ptr<Observer> clone() const = 0;
  /// What was observed, as floats (saved with a FakeQuantize's config): empty when nothing was.
  [[nodiscard]] virtual std::vector<float> state() const = 0;
  /// Restores a state() of an observer of the same kind; value_error naming the observer otherwise.
  virtual void set_state(const std::vector<float>& s) = 0;

 protected:
  void require_state_size(const std::vector<float>& s, bool fits) const {
    if (!s.empty() && !fits)
      throw value_error(name() + ": a saved state of " + std::to_string(s.size()) + " numbers does not fit this observer");
  }
  void require_observed() const {
    if (!observed())
      throw value_error(name() + ": qparams() before any observation; observe a non-empty tensor first");
  }

 private:
  QScheme scheme_;
};

/// Running min and max over everything observed (per tensor).
class MinMaxObserver : public Observer {
 public:
  explicit MinMaxObserver(QScheme scheme = {}) : Observer(std::move(scheme)) {
    this->scheme().check(MinMaxObserver::name());
    if (this->scheme().per_channel)
      throw value_error("MinMaxObserver: a per-channel scheme; use PerChannelMinMaxObserver");
  }
  [[nodiscard]] std::string name() const override { return "MinMaxObserver"; }

  void observe(const Tensor& x) override {
    detail::require_observable(name(), x);
    if (x.numel() == 0) return;
    const auto [lo, hi] = detail::min_max(x.data<float>(), static_cast<std::size_t>(x.numel()), name());
    update(lo, hi);
  }
  [[nodiscard]] bool observed() const noexcept override { return min_val_ <= max_val_; }
  [[nodiscard]] float min_val() const noexcept { return min_val_; }
  [[nodiscard]] float max_val() const noexcept { return max_val_; }
  [[nodiscard]] ScaleZeroPoint qparams() const {
    require_observed();
    return quant::calculate_qparams(min_val_, max_val_, scheme());
  }
  [[nodiscard]] QParamsTensors calculate_qparams() const override { return detail::as_tensors({qparams()}); }
  void reset() override {
    min_val_ = std::numeric_limits<float>::infinity();
    max_val_ = -min_val_;
  }
  [[nodiscard]] std::unique_ptr<Observer> clone() const override { return std::make_unique<MinMaxObserver>(*this); }
  [[nodiscard]] std::vector<float> state() const override {
    return observed() ? std::vector<float>{min_val_, max_val_} : std::vector<float>{};
  }
  void set_state(const std::vector<float>& s) override {
    require_state_size(s, s.size() == 2 && s[0] <= s[1]);
    reset();
    if (!s.empty()) min_val_ = s[0], max_val_ = s[1];
  }

 protected:
  virtual void update(float lo, float hi) {
    min_val_ = std::min(min_val_, lo);
    max_val_ = std::max(max_val_, hi);
  }
  float min_val_ = std::numeric_limits<float>::infinity();
  float max_val_ = -std::numeric_limits<float>::infinity();
};

/// Min and max as exponential moving averages of each batch's: the first batch sets them.
class MovingAverageMinMaxObserver : public MinMaxObserver {
 public:
  explicit MovingAverageMinMaxObserver(QScheme scheme = {}, float averaging_constant = 0.01f)
      : MinMaxObserver(std::move(scheme)), averaging_constant_(averaging_constant) {
    if (!(averaging_constant > 0.f && averaging_constant <= 1.f))
      throw value_error("MovingAverageMinMaxObserver: averaging_constant " + repr_real(averaging_constant) +
                        " must be in (0, 1]");
  }
  [[nodiscard]] std::string name() const override { return "MovingAverageMinMaxObserver"; }
  [[nodiscard]] float averaging_constant() const noexcept { return averaging_constant_; }
  [[nodiscard]] std::unique_ptr<Observer> clone() const override {
    return std::make_unique<MovingAverageMinMaxObserver>(*this);
  }

 protected:
  void update(float lo, float hi) override {
    if (!observed()) {
      min_val_ = lo;
      max_val_ = hi;
      return;
    }
    min_val_ = detail::moving_average(min_val_, lo, averaging_constant_);
    max_val_ = detail::moving_average(max_val_, hi, averaging_constant_);
  }

 private:
  float averaging_constant_;
};

/// Running min and max per index of the scheme's channel axis; qparams per channel.
class PerChannelMinMaxObserver : public Observer {
 public:
  explicit PerChannelMinMaxObserver(QScheme scheme = {.mode = QMode::symmetric, .per_channel = true})
      : Observer(std::move(scheme)) {
    this->scheme().check(PerChannelMinMaxObserver::name());
    if (!this->scheme().per_channel)
      throw value_error("PerChannelMinMaxObserver: a per-tensor scheme; use MinMaxObserver");
  }
  [[nodiscard]] std::string name() const override { return "PerChannelMinMaxObserver"; }

  void observe(const Tensor& x) override {
    detail::require_observable(name(), x);
    const auto r = static_cast<std::int64_t>(x.shape().rank());
    const std::int64_t a = scheme().axis;
    if (a < -r || a >= r)
      throw value_error(name() + ": channel axis " + std::to_string(a) + " is out of range for a tensor of shape " +
                        x.shape().to_string());
    const auto axis = static_cast<std::size_t>(a < 0 ? a + r : a);
    const auto channels = static_cast<std::size_t>(x.shape()[axis]);
    if (observed() && channels != min_vals_.size())
      throw value_error(name() + ": a tensor of shape " + x.shape().to_string() + " has " + std::to_string(channels) +
                        " channels on axis " + std::to_string(a) + ", but " + std::to_string(min_vals_.size()) +
                        " were observed before");
    if (x.numel() == 0) return;
    std::size_t inner = 1;
    for (std::size_t i = axis + 1; i < x.shape().rank(); ++i) inner *= static_cast<std::size_t>(x.shape()[i]);
    const std::size_t outer = static_cast<std::size_t>(x.numel()) / (channels * inner);
    std::vector<float> lo(channels, std::numeric_limits<float>::infinity()), hi(channels, -lo[0]);
    for (std::size_t o = 0; o < outer; ++o)
      for (std::size_t c = 0; c < channels; ++c) {
        const auto [l, h] = detail::min_max(x.data<float>() + (o * channels + c) * inner, inner, name());
        lo[c] = std::min(lo[c], l);
        hi[c] = std::max(hi[c], h);
      }
    if (!observed()) {
      min_vals_ = std::move(lo);
      max_vals_ = std::move(hi);
      return;
    }
    for (std::size_t c = 0; c < channels; ++c) {
      min_vals_[c] = std::min(min_vals_[c], lo[c]);
      max_vals_[c] = std::max(max_vals_[c], hi[c]);
    }
  }
  [[nodiscard]] bool observed() const noexcept override { return !min_vals_.empty(); }
  [[nodiscard]] const std::vector<float>& min_vals() const noexcept { return min_vals_; }
  [[nodiscard]] const std::vector<float>& max_vals() const noexcept { return max_vals_; }
  /// Scale float32 (C,) and zero point int32 (C,).
  [[nodiscard]] QParamsTensors qparams() const {
    require_observed();
    std::vector<ScaleZeroPoint> q;
    for (std::size_t c = 0; c < min_vals_.size(); ++c) q.push_back(quant::calculate_qparams(min_vals_[c], max_vals_[c], scheme()));
    return detail::as_tensors(q);
  }
  [[nodiscard]] QParamsTensors calculate_qparams() const override { return qparams(); }
  void reset() override {
    min_vals_.clear();
    max_vals_.clear();
  }
  [[nodiscard]] std::unique_ptr<Observer> clone() const override {
    return std::make_unique<PerChannelMinMaxObserver>(*this);
  }
  /// The minima, then the maxima.
  [[nodiscard]] std::vector<float> state() const override {
    std::vector<float> s = min_vals_;
    s.insert(s.end(), max_vals_.begin(), max_vals_.end());
    return s;
  }
  void set_state(const std::vector<float>& s) override {
    require_state_size(s, s.size() % 2 == 0);
    const auto half = static_cast<std::ptrdiff_t>(s.size() / 2);
    min_vals_.assign(s.begin(), s.begin() + half);
    max_vals_.assign(s.begin() + half, s.end());
  }

 private:
  std::vector<float> min_vals_, max_vals_;
};

}  // namespace tracemod::quant
