// HistogramObserver: PyTorch 1.13's (torch.ao.quantization.HistogramObserver, which MegEngine's
// HistogramObserver ports): a histogram of everything observed over [min, max] in 2048 bins, and
// qparams from the sub-range [new_min, new_max] that a search over the histogram picks to minimise
// the L2 error of quantizing it to 256 levels (`_non_linear_param_search`, from caffe2's
// NormMinimization): the search drops the bin range's ends, the side holding less mass first, in
// steps of 1e-5 of the total, while the error does not grow.
// A later batch whose range is wider re-bins the histogram over the union (each old bin spread over
// upsample_rate = 128 sub-bins, then summed down), as PyTorch's `_combine_histograms`.
// Differences from PyTorch 1.13, both deliberate: its histc call bins over [int(min), int(max)] (the
// range truncated to integers, dropping what lies outside; tracemod bins over [min, max]), and its
// L2 error is summed in float32 tensors (tracemod sums in double). The qparams are the same when the
// observed extremes are integers and no two candidate errors are within float32 rounding of each other.
#pragma once

#include <tracemod/quant/observer.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace tracemod::quant {

class HistogramObserver : public Observer {
 public:
  explicit HistogramObserver(QScheme scheme = {.dtype = QuantDType::quint8()}, std::int64_t bins = 2048,
                             std::int64_t upsample_rate = 128)
      : Observer(std::move(scheme)), bins_(bins), upsample_rate_(upsample_rate) {
    this->scheme().check(HistogramObserver::name());
    if (this->scheme().per_channel) throw value_error("HistogramObserver: a per-channel scheme; it observes per tensor");
    if (bins < 1 || upsample_rate < 1)
      throw value_error("HistogramObserver: bins " + std::to_string(bins) + " and upsample_rate " +
                        std::to_string(upsample_rate) + " must be positive");
  }
  [[nodiscard]] std::string name() const override { return "HistogramObserver"; }

  void observe(const Tensor& x) override {
    detail::require_observable(name(), x);
    if (x.numel() == 0) return;
    const float* p = x.data<float>();
    const auto n = static_cast<std::size_t>(x.numel());
    const auto [lo, hi] = detail::min_max(p, n, name());
    if (!observed() || min_val_ == max_val_) {
      min_val_ = lo;
      max_val_ = hi;
      histogram_ = histc(p, n, lo, hi);
      return;
    }
    const float combined_min = std::min(lo, min_val_);
    float combined_max = std::max(hi, max_val_);
    // the old histogram's sub-bin width; the combined range is a whole number of old ranges' bins
    const float sub_width = (max_val_ - min_val_) / static_cast<float>(bins_ * upsample_rate_);
    const float bins_width = static_cast<float>(bins_) * sub_width;
    const auto downsample_rate = static_cast<std::int64_t>(std::ceil((combined_max - combined_min) / bins_width));
    const volatile float widened = static_cast<float>(downsample_rate) * bins_width;  // no FMA: PyTorch's steps
    combined_max = combined_max + (widened - (combined_max - combined_min));
    const auto start = static_cast<std::int64_t>(std::nearbyint((min_val_ - combined_min) / sub_width));
    std::vector<float> combined = histc(p, n, combined_min, combined_max);
    if (combined_min == min_val_ && combined_max == max_val_) {
      for (std::size_t i = 0; i < combined.size(); ++i) combined[i] += histogram_[i];
    } else {
      add_rebinned(combined, downsample_rate, start);
    }
    histogram_ = std::move(combined);
    min_val_ = combined_min;
    max_val_ = combined_max;
  }
  [[nodiscard]] bool observed() const noexcept override { return !histogram_.empty(); }
  [[nodiscard]] float min_val() const noexcept { return min_val_; }
  [[nodiscard]] float max_val() const noexcept { return max_val_; }
  [[nodiscard]] const std::vector<float>& histogram() const noexcept { return histogram_; }

  [[nodiscard]] ScaleZeroPoint qparams() const {
    require_observed();
    const auto [start, end] = search();
    const float bin_width = (max_val_ - min_val_) / static_cast<float>(bins_);
    const volatile float below = bin_width * static_cast<float>(start), above = bin_width * static_cast<float>(end + 1);
    return quant::calculate_qparams(min_val_ + below, min_val_ + above, scheme());
  }
  [[nodiscard]] QParamsTensors calculate_qparams() const override { return detail::as_tensors({qparams()}); }
  void reset() override {
    histogram_.clear();
    min_val_ = std::numeric_limits<float>::infinity();
    max_val_ = -min_val_;
  }
  [[nodiscard]] std::unique_ptr<Observer> clone() const override { return std::make_unique<HistogramObserver>(*this); }
  [[nodiscard]] std::int64_t bins() const noexcept { return bins_; }
  [[nodiscard]] std::int64_t upsample_rate() const noexcept { return upsample_rate_; }
  /// min, max, then the bins.
  [[nodiscard]] std::vector<float> state() const override {
    if (!observed()) return {};
    std::vector<float> s{min_val_, max_val_};
    s.insert(s.end(), histogram_.begin(), histogram_.end());
    return s;
  }
  void set_state(const std::vector<float>& s) override {
    require_state_size(s, s.size() == static_cast<std::size_t>(bins_) + 2 && s[0] <= s[1]);
    reset();
    if (s.empty()) return;
    min_val_ = s[0];
    max_val_ = s[1];
    histogram_.assign(s.begin() + 2, s.end());
  }

 private:
  /// torch.histc: bins_ equal bins over [lo, hi] (the last one closed); lo == hi widens to [lo - 1, hi + 1].
  [[nodiscard]] std::vector<float> histc(const float* x, std::size_t n, float lo, float hi) const {
    if (lo == hi) {
      lo -= 1;
      hi += 1;
    }
    std::vector<float> h(static_cast<std::size_t>(bins_), 0.f);
    const float bins = static_cast<float>(bins_);
    for (std::size_t i = 0; i < n; ++i) {
      if (x[i] < lo || x[i] > hi) continue;
      auto b = static_cast<std::int64_t>((x[i] - lo) * bins / (hi - lo));
      h[static_cast<std::size_t>(std::min(b, bins_ - 1))] += 1.f;
    }
    return h;
  }

  /// Adds the old histogram, re-binned onto the combined range, to `combined` (PyTorch's
  /// _combine_histograms): each old bin spread evenly over upsample_rate sub-bins placed from `start`,
  /// then every downsample_rate sub-bins summed into one combined bin.
  void add_rebinned(std::vector<float>& combined, std::int64_t downsample_rate, std::int64_t start) const {
    const std::int64_t sub_bins = bins_ * downsample_rate;
    double integral = 0, previous = 0;
    std::int64_t sub = 0;
    for (std::int64_t b = 0; b < bins_; ++b) {
      for (std::int64_t k = 0; k < downsample_rate && sub < sub_bins; ++k, ++sub) {
        const std::int64_t old = sub - start;
        if (old >= 0 && old < bins_ * upsample_rate_) integral += histogram_[static_cast<std::size_t>(old / upsample_rate_)];
      }
      // PyTorch keeps the shifted cumulative sum in float32
      const double shifted = static_cast<double>(static_cast<float>(previous));
      combined[static_cast<std::size_t>(b)] += static_cast<float>((integral - shifted) / static_cast<double>(upsample_rate_));
      previous = integral;
    }
  }

  /// The L2 error of quantizing bins [first, last] to 256 levels (PyTorch's _compute_quantization_error).
  [[nodiscard]] double quantization_error(std::int64_t first, std::int64_t last) const {
    const double bin_width = (static_cast<double>(max_val_) - static_cast<double>(min_val_)) / static_cast<double>(bins_);
    const double dst_nbins = 256;
    const double dst_width = bin_width * static_cast<double>(last - first + 1) / dst_nbins;
    if (dst_width == 0.0) return 0.0;
    const auto norm = [](double begin, double end, double density) {
      return density * (end * end * end - begin * begin * begin) / 3;
    };
    double total = 0;
    for (std::int64_t i = 0; i < bins_; ++i) {
      const double begin = static_cast<double>(i - first) * bin_width, end = begin + bin_width;
      const double dst_begin = std::clamp(std::floor(begin / dst_width), 0.0, dst_nbins - 1);
      const double dst_end = std::clamp(std::floor(end / dst_width), 0.0, dst_nbins - 1);
      const double density = static_cast<double>(histogram_[static_cast<std::size_t>(i)]) / bin_width;
      total += norm(begin - (dst_begin + 0.5) * dst_width, dst_width / 2, density);
      total += (dst_end - dst_begin - 1) * norm(-dst_width / 2, dst_width / 2, density);
      total += norm(-dst_width / 2, end - (dst_end * dst_width + dst_width / 2), density);
    }
    return total;
  }

  /// The first and last bins of the range to quantize (PyTorch's _non_linear_param_search).
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> search() const {
    std::vector<float> cumulative(histogram_.size());
    float running = 0, total = 0;
    for (float h : histogram_) total += h;
    for (std::size_t i = 0; i < histogram_.size(); ++i) cumulative[i] = running += histogram_[i];
    const auto at = [&](std::int64_t i) { return cumulative[static_cast<std::size_t>(i)]; };
    const double step = 1e-5;
    double alpha = 0, beta = 1, norm_min = std::numeric_limits<double>::infinity();
    std::int64_t start = 0, end = bins_ - 1;
    while (alpha < beta) {
      const double next_alpha = alpha + step, next_beta = beta - step;
      std::int64_t l = start, r = end;
      while (l < end && at(l) < static_cast<float>(next_alpha * total)) ++l;
      while (r > start && at(r) > static_cast<float>(next_beta * total)) --r;
      std::int64_t next_start = start, next_end = end;
      if (l - start > end - r) {
        next_start = l;
        alpha = next_alpha;
      } else {
        next_end = r;
        beta = next_beta;
      }
      if (next_start == start && next_end == end) continue;
      const double norm = quantization_error(next_start, next_end);
      if (norm > norm_min) break;
      norm_min = norm;
      start = next_start;
      end = next_end;
    }
    return {start, end};
  }

  std::int64_t bins_, upsample_rate_;
  std::vector<float> histogram_;
  float min_val_ = std::numeric_limits<float>::infinity();
  float max_val_ = -std::numeric_limits<float>::infinity();
};

}  // namespace tracemod::quant
