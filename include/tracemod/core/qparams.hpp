// Quantization parameters a tensor may carry. Metadata only: no kernel reads them.
#pragma once

#include <cstdint>
#include <string>

namespace tracemod {

/// MegEngine's QParams reduced to what a float32 pipeline carries: the quantized dtype it stands
/// for (e.g. "qint8"), the scale and the zero point.
struct QParams {
  std::string dtype_meta = "qint8";
  float scale = 1.f;
  std::int32_t zero_point = 0;

  friend bool operator==(const QParams&, const QParams&) = default;
};

}  // namespace tracemod
