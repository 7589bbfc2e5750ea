// Quantization schemes and the qparams of an observed range, as PyTorch 1.13's observers compute
// them (torch.ao.quantization.observer, `_calculate_qparams`).
//
// A scheme is a quantized dtype (its integer range), a granularity (one scale for the tensor, or one
// per index of a channel axis) and a mode: affine (a zero point that places the observed minimum on
// quant_min) or symmetric (a range centred on zero). For an observed [min, max]:
//   min' = min(min, 0), max' = max(max, 0)       (zero stays exactly representable)
//   symmetric: scale = max(-min', max') / ((quant_max - quant_min) / 2)
//              zero_point = 0 for a signed dtype, 128 for quint8 (the middle of [quant_min, quant_max]
//              when the range is custom)
//   affine:    scale = (max' - min') / (quant_max - quant_min)
//              zero_point = clamp(quant_min - round(min' / scale), quant_min, quant_max)
//   scale = max(scale, eps), eps the float32 epsilon (so a constant-zero input has a usable scale)
// All in float32, as PyTorch; round is round half to even (torch.round, std::nearbyint).
// MegEngine's observers (megengine.quantization.observer) state their dtypes the same way (qint8,
// quint8, qint8_narrow = [-127, 127]) and compute the same scales, but round the zero point half
// away from zero (F.round) and default to symmetric; docs/quantization.md lists the differences.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/repr.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace tracemod::quant {

/// A quantized integer type and the range its values use: qint8 [-128, 127], quint8 [0, 255], and
/// MegEngine's qint8_narrow [-127, 127] (for weights: a sum of two products of -128s overflows int16).
/// reduce_range (PyTorch's, for x86's fbgemm) drops one bit: [-64, 63] and [0, 127].
struct QuantDType {
  std::string name = "qint8";
  std::int64_t quant_min = -128;
  std::int64_t quant_max = 127;
  bool is_signed = true;

  [[nodiscard]] static QuantDType qint8(bool reduce_range = false) {
    return reduce_range ? QuantDType{"qint8", -64, 63, true} : QuantDType{"qint8", -128, 127, true};
  }
  [[nodiscard]] static QuantDType quint8(bool reduce_range = false) {
    return reduce_range ? QuantDType{"quint8", 0, 127, false} : QuantDType{"quint8", 0, 255, false};
  }
  [[nodiscard]] static QuantDType qint8_narrow() { return {"qint8_narrow", -127, 127, true}; }
  /// Whether the range is not the type's full one (PyTorch's has_customized_qrange).
  [[nodiscard]] bool custom_range() const noexcept {
    return is_signed ? !(quant_min == -128 && quant_max == 127) : !(quant_min == 0 && quant_max == 255);
  }

  friend bool operator==(const QuantDType&, const QuantDType&) = default;
};

enum class QMode : std::uint8_t { affine, symmetric };

/// How a tensor is quantized: dtype, mode, and per tensor (axis unset) or per channel along `axis`.
struct QScheme {
  QuantDType dtype = QuantDType::qint8();
  QMode mode = QMode::affine;
  bool per_channel = false;
  std::int64_t axis = 0;  ///< the channel axis when per_channel (negative counts from the end)

  /// Throws value_error naming `who` unless quant_min < quant_max.
  void check(const std::string& who) const {
    if (dtype.quant_min >= dtype.quant_max)
      throw value_error(who + ": quant_min " + std::to_string(dtype.quant_min) + " must be below quant_max " +
                        std::to_string(dtype.quant_max) + " (dtype " + dtype.name + ")");
  }

  friend bool operator==(const QScheme&, const QScheme&) = default;
};

/// The float32 epsilon: the least scale an observer reports.
inline constexpr float qparams_eps = std::numeric_limits<float>::epsilon();

/// One scale and zero point.
struct ScaleZeroPoint {
  float scale = 1.f;
  std::int32_t zero_point = 0;

  friend bool operator==(const ScaleZeroPoint&, const ScaleZeroPoint&) = default;
};

/// The scale and zero point of an observed range [min_val, max_val] under `scheme` (PyTorch's
/// `_calculate_qparams` for one channel). Throws value_error for min_val > max_val or a non-finite bound.
[[nodiscard]] inline ScaleZeroPoint calculate_qparams(float min_val, float max_val, const QScheme& scheme,
                                                      float eps = qparams_eps) {
  scheme.check("calculate_qparams");
  if (!std::isfinite(min_val) || !std::isfinite(max_val) || min_val > max_val)
    throw value_error("calculate_qparams: the observed range [" + repr_real(min_val) + ", " + repr_real(max_val) +
                      "] is not a finite range with min <= max");
  const float min_neg = std::min(min_val, 0.f), max_pos = std::max(max_val, 0.f);
  const std::int64_t qmin = scheme.dtype.quant_min, qmax = scheme.dtype.quant_max;
  ScaleZeroPoint r;
  if (scheme.mode == QMode::symmetric) {
    const float half_range = static_cast<float>(static_cast<double>(qmax - qmin) / 2);
    r.scale = std::max(std::max(-min_neg, max_pos) / half_range, eps);
    if (!scheme.dtype.is_signed)
      r.zero_point = static_cast<std::int32_t>(scheme.dtype.custom_range() ? (qmin + qmax) / 2 : 128);
  } else {
    r.scale = std::max((max_pos - min_neg) / static_cast<float>(qmax - qmin), eps);
    const auto zp = qmin - static_cast<std::int64_t>(std::nearbyint(min_neg / r.scale));
    r.zero_point = static_cast<std::int32_t>(std::clamp(zp, qmin, qmax));
  }
  return r;
}

}  // namespace tracemod::quant
