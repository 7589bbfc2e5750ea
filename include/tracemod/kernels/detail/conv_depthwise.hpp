// Direct convolution of one plane by one r x s filter: the depthwise case (one input channel per
// group), where an im2col GEMM would have a reduction of only r * s and mostly pack.
//
// A strided convolution reads every stride_w-th input column. Instead of gathering them, the
// padded copy of the plane the kernel makes anyway is stored de-interleaved: stride_w phase planes,
// phase p holding columns p, p + stride_w, ... Tap (ry, sx) of output column ox then reads column
// ox + sx * dil_w / stride_w of phase sx * dil_w % stride_w, so every read is a unit-stride vector
// load, whatever the stride.
//
// Small stride-1 planes whose output is as wide as the input ("same" padding: MobileNetV2's 14x14
// and 7x7) are instead computed flat: output pixel o = oy * w + ox reads tap (ry, sx) at flat
// offset o + (ry * dil_h - pad_h) * w + sx * dil_w - pad_w of the unpadded plane, so the vectors run
// over the whole plane, not row by row (a 7x7 plane is four 16-float vectors, not seven), and the
// output is stored as it lies. A tap that crosses the left or right edge wraps into the row above or
// below: it reads a copy of the plane whose wrapped-into columns are zero, one copy per distinct
// column shift (three for a 3x3 filter), with zero rows above and below.
//
// Either layout is set up once per run of planes (conv_depthwise_kernel): its padding is zeroed
// once, and each plane only writes its data into it.
#pragma once

#include <tracemod/kernels/detail/activation.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

namespace tracemod::kernels::detail {

struct conv_plane_window {
  std::int64_t h, w, out_h, out_w;
  std::int64_t r, s;
  std::int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
};

/// The padded, de-interleaved copy of a plane: phase p, row y, column q at
/// data[(p * rows + y) * pitch + q] holds padded column q * stride_w + p (zero past the padding).
struct conv_phase_planes {
  std::int64_t rows, pitch, phases;

  explicit conv_phase_planes(const conv_plane_window& g)
      : rows(g.h + 2 * g.pad_h), pitch((g.w + 2 * g.pad_w + g.stride_w - 1) / g.stride_w), phases(g.stride_w) {}

  /// Floats to allocate: the planes plus one vector of slack, since the last vector of an output
  /// row may read up to a vector past its row's last valid column.
  [[nodiscard]] std::int64_t floats() const { return phases * rows * pitch + static_cast<std::int64_t>(simd_width); }

  /// Offset of tap (ry, sx) from an output pixel's origin.
  [[nodiscard]] std::int64_t tap_offset(const conv_plane_window& g, std::int64_t ry, std::int64_t sx) const {
    const std::int64_t col = sx * g.dil_w;
    return (col % phases * rows + ry * g.dil_h) * pitch + col / phases;
  }
};

/// Writes x (h x w) into `dst` laid out as `planes` describes. Only data positions are written: the
/// padding and slack must already be zero, and stay so from one plane to the next.
inline void conv_deinterleave_plane(const conv_plane_window& g, const conv_phase_planes& planes, const float* x,
                                    float* dst) {
  const std::int64_t s = planes.phases;
  for (std::int64_t y = 0; y < g.h; ++y) {
    const float* src = x + y * g.w;
    float* row = dst + (g.pad_h + y) * planes.pitch;
    if (s == 1) {
      std::copy_n(src, g.w, row + g.pad_w);
      continue;
    }
    const std::int64_t phase_stride = planes.rows * planes.pitch;
    if (s == 2) {  // one sequential pass that the compiler turns into vector shuffles
      const std::int64_t odd = g.pad_w % 2;  // input column 0 lands in phase pad_w % 2
      float* even_phase = row + odd * phase_stride + g.pad_w / 2;
      float* odd_phase = row + (1 - odd) * phase_stride + (g.pad_w + 1) / 2;
      const std::int64_t pairs = g.w / 2;
      for (std::int64_t q = 0; q < pairs; ++q) {
        even_phase[q] = src[2 * q];
        odd_phase[q] = src[2 * q + 1];
      }
      if (g.w % 2 != 0) even_phase[pairs] = src[g.w - 1];
      continue;
    }
    // Phase p holds the padded columns p, p + s, ...: input columns p - pad_w, p - pad_w + s, ...
    for (std::int64_t p = 0; p < s; ++p) {
      const std::int64_t first = (p - g.pad_w % s + s) % s;  // first input column of phase p
      float* phase = row + p * phase_stride + (first + g.pad_w) / s;
      for (std::int64_t col = first, q = 0; col < g.w; col += s, ++q) phase[q] = src[col];
    }
  }
}

/// The flat layout of a small stride-1 plane (see the top of this file): copy j holds the plane
/// with the columns that column shift shifts[j] wraps into zeroed, between `front` and `back` zeros.
struct conv_flat_planes {
  std::int64_t plane = 0, vectors = 0, front = 0, region = 0;
  std::vector<std::int64_t> shifts;

  /// Largest copies * plane that runs flat: the copies stay in L1 while the plane is computed.
  static constexpr std::int64_t max_floats = 6144;

  /// Whether the plane runs flat: stride 1, the output as wide as the input, at least a vector.
  static bool fits(const conv_plane_window& g) {
    if (g.stride_h != 1 || g.stride_w != 1 || g.out_w != g.w || g.h * g.w < static_cast<std::int64_t>(simd_width))
      return false;
    return g.s * g.h * g.w <= max_floats;  // out_w == w: the s column shifts are distinct
  }

  conv_flat_planes() = default;
  explicit conv_flat_planes(const conv_plane_window& g) : plane(g.h * g.w) {
    constexpr auto width = static_cast<std::int64_t>(simd_width);
    vectors = (g.out_h * g.w + width - 1) / width;
    for (std::int64_t sx = 0; sx < g.s; ++sx)
      if (std::find(shifts.begin(), shifts.end(), shift(g, sx)) == shifts.end()) shifts.push_back(shift(g, sx));
    std::int64_t lowest = 0, highest = 0;
    for (std::int64_t ry = 0; ry < g.r; ++ry)
      for (std::int64_t sx = 0; sx < g.s; ++sx) {
        const std::int64_t offset = (ry * g.dil_h - g.pad_h) * g.w + shift(g, sx);
        lowest = std::min(lowest, offset);
        highest = std::max(highest, offset);
      }
    front = -lowest;
    // The last vector's lanes past the plane are computed (and not stored): they read up to here.
    const std::int64_t back = std::max<std::int64_t>(0, vectors * width + highest - plane);
    region = front + plane + back;
  }

  [[nodiscard]] static std::int64_t shift(const conv_plane_window& g, std::int64_t sx) {
    return sx * g.dil_w - g.pad_w;
  }
  [[nodiscard]] std::int64_t copy_of(std::int64_t d) const {
    return std::find(shifts.begin(), shifts.end(), d) - shifts.begin();
  }
  /// Floats to allocate: the copies, then one mask plane per copy (all bits set where kept).
  [[nodiscard]] std::int64_t floats() const { return static_cast<std::int64_t>(shifts.size()) * (region + plane); }
  /// Offset of tap (ry, sx) in the buffer from an output pixel's flat index.
  [[nodiscard]] std::int64_t tap_offset(const conv_plane_window& g, std::int64_t ry, std::int64_t sx) const {
    return copy_of(shift(g, sx)) * region + front + (ry * g.dil_h - g.pad_h) * g.w + shift(g, sx);
  }
  [[nodiscard]] float* mask(float* buffer, std::size_t copy) const {
    return buffer + static_cast<std::int64_t>(shifts.size()) * region + static_cast<std::int64_t>(copy) * plane;
  }

  /// Zeroes the copies and writes the masks: column ix of copy j is kept unless shift d = shifts[j]
  /// wraps into it (d < 0: the last -d columns; d > 0: the first d).
  void prepare(const conv_plane_window& g, float* buffer) const {
    std::fill_n(buffer, static_cast<std::int64_t>(shifts.size()) * region, 0.0f);
    for (std::size_t j = 0; j < shifts.size(); ++j) {
      const std::int64_t d = shifts[j];
      float* m = mask(buffer, j);
      for (std::int64_t i = 0; i < plane; ++i) {
        const std::int64_t ix = i % g.w;
        const bool wrapped = d < 0 ? ix >= g.w + d : ix < d;
        m[i] = std::bit_cast<float>(wrapped ? 0u : ~0u);
      }
    }
  }

  /// Writes the plane x into every copy, masked.
  void write(const float* x, float* buffer) const {
    constexpr auto width = static_cast<std::int64_t>(simd_width);
    for (std::size_t j = 0; j < shifts.size(); ++j) {
      float* dst = buffer + static_cast<std::int64_t>(j) * region + front;
      const float* m = mask(buffer, j);
      // Whole vectors, the last one ending at the plane's end (overlapping its predecessor).
      for (std::int64_t i = 0;; i += width) {
        i = std::min(i, plane - width);
        fbatch v = fbatch::load_unaligned(x + i);
        if (shifts[j] != 0) v = xsimd::bitwise_and(v, fbatch::load_unaligned(m + i));
        v.store_unaligned(dst + i);
        if (i == plane - width) break;
      }
    }
  }
};

/// The first `count` lanes of x to out.
inline void conv_store_columns(const fbatch& x, std::int64_t count, float* out) {
  if (count == static_cast<std::int64_t>(simd_width)) {
    x.store_unaligned(out);
    return;
  }
  alignas(buffer_alignment) std::array<float, simd_width> lanes;
  x.store_aligned(lanes.data());
  std::copy_n(lanes.data(), count, out);
}

/// The first `count` floats at `in` as a vector, the other lanes zero.
inline fbatch conv_load_columns(const float* in, std::int64_t count) {
  if (count == static_cast<std::int64_t>(simd_width)) return fbatch::load_unaligned(in);
  alignas(buffer_alignment) std::array<float, simd_width> lanes{};
  std::copy_n(in, count, lanes.data());
  return fbatch::load_aligned(lanes.data());
}

/// What the depthwise kernel does to an output vector before storing it: adds the residual plane
/// (laid out like the output; null for none) and applies the activation.
struct conv_plane_epilogue {
  const float* residual = nullptr;
  activation act = activation::none;
};

/// Where output vector t of a plane reads its taps from (offset into the copy) and stores to.
struct conv_vector_origin {
  std::int64_t input, output;
};

/// One plane's computation: the copy, the tap offsets from a vector's origin, and where each
/// vector starts.
template <class Origin>
struct conv_depthwise_pass {
  const float* copy;
  const std::int64_t* tap_offsets;
  std::int64_t taps, plane_end;  // plane_end: out_h * out_w
  Origin origin;                 // vector index -> conv_vector_origin
};

/// Output vectors t0 + J of a plane: each accumulates in its own register through all taps, so the
/// J independent chains hide the FMA latency. The epilogue runs on the registers.
template <class Origin, std::int64_t... J>
inline void conv_depthwise_vectors(std::integer_sequence<std::int64_t, J...>, std::int64_t t0,
                                   const conv_depthwise_pass<Origin>& pass, const float* filter, float bias,
                                   const conv_plane_epilogue& epilogue, float* y) {
  constexpr auto width = static_cast<std::int64_t>(simd_width);
  const std::array<conv_vector_origin, sizeof...(J)> origin{pass.origin(t0 + J)...};
  const std::array<const float*, sizeof...(J)> in{(pass.copy + origin[J].input)...};
  std::array<fbatch, sizeof...(J)> acc;
  ((acc[J] = fbatch(bias)), ...);
  for (std::int64_t tap = 0; tap < pass.taps; ++tap) {
    const fbatch weight(filter[tap]);
    const std::int64_t shift = pass.tap_offsets[tap];
    ((acc[J] = xsimd::fma(weight, fbatch::load_unaligned(in[J] + shift), acc[J])), ...);
  }
  // A vector may spill whole past its row (into the following rows, whose vectors are stored after
  // it, later in this fold or in a later call); only the plane's end must not be crossed.
  const std::array<std::int64_t, sizeof...(J)> count{std::min(width, pass.plane_end - origin[J].output)...};
  if (epilogue.residual != nullptr)
    ((acc[J] = acc[J] + conv_load_columns(epilogue.residual + origin[J].output, count[J])), ...);
  if (epilogue.act != activation::none) ((acc[J] = activate(epilogue.act, acc[J])), ...);
  (conv_store_columns(acc[J], count[J], y + origin[J].output), ...);
}

/// Vectors [t, vectors) of a plane, fewer than `Chains`: one fold of exactly that many chains.
template <std::int64_t Chains, class Origin>
inline void conv_depthwise_tail(std::int64_t t, std::int64_t vectors, const conv_depthwise_pass<Origin>& pass,
                                const float* filter, float bias, const conv_plane_epilogue& epilogue, float* y) {
  if constexpr (Chains > 1) {
    if (vectors - t == Chains - 1)
      conv_depthwise_vectors(std::make_integer_sequence<std::int64_t, Chains - 1>{}, t, pass, filter, bias, epilogue,
                             y);
    else
      conv_depthwise_tail<Chains - 1>(t, vectors, pass, filter, bias, epilogue, y);
  }
}

/// All `vectors` output vectors of a plane, eight chains at a time, the rest in one fold.
template <class Origin>
inline void conv_depthwise_fold(std::int64_t vectors, const conv_depthwise_pass<Origin>& pass, const float* filter,
                                float bias, const conv_plane_epilogue& epilogue, float* y) {
  constexpr std::int64_t chains = 8;
  std::int64_t t = 0;
  for (; t + chains <= vectors; t += chains)
    conv_depthwise_vectors(std::make_integer_sequence<std::int64_t, chains>{}, t, pass, filter, bias, epilogue, y);
  conv_depthwise_tail<chains>(t, vectors, pass, filter, bias, epilogue, y);
}

/// y = act(bias + x (*) filter + residual) for planes of one window, one after the other on one
/// thread: the layout (flat or de-interleaved), its padding and the tap offsets are set up once.
class conv_depthwise_kernel {
 public:
  explicit conv_depthwise_kernel(const conv_plane_window& g)
      : g_(g), flat_(conv_flat_planes::fits(g)), phases_(g), layout_(flat_ ? conv_flat_planes(g) : conv_flat_planes()) {
    const std::int64_t floats = flat_ ? layout_.floats() : phases_.floats();
    copy_ = scratch(scratch_slot::conv_input, static_cast<std::size_t>(floats));
    if (flat_)
      layout_.prepare(g, copy_);
    else
      std::fill_n(copy_, floats, 0.0f);
    tap_offsets_.resize(static_cast<std::size_t>(g.r * g.s));
    for (std::int64_t ry = 0; ry < g.r; ++ry)
      for (std::int64_t sx = 0; sx < g.s; ++sx)
        tap_offsets_[static_cast<std::size_t>(ry * g.s + sx)] =
            flat_ ? layout_.tap_offset(g, ry, sx) : phases_.tap_offset(g, ry, sx);
  }

  /// One plane. Consecutive calls with the same x (several filters per channel) copy it once.
  void operator()(const float* x, const float* filter, float bias, float* y, const conv_plane_epilogue& epilogue = {}) {
    constexpr auto width = static_cast<std::int64_t>(simd_width);
    if (x != last_x_) {
      if (flat_)
        layout_.write(x, copy_);
      else
        conv_deinterleave_plane(g_, phases_, x, copy_);
      last_x_ = x;
    }
    const std::int64_t taps = g_.r * g_.s, plane_end = g_.out_h * g_.out_w;
    if (flat_) {
      const auto origin = [](std::int64_t t) { return conv_vector_origin{t * width, t * width}; };
      conv_depthwise_fold(layout_.vectors, conv_depthwise_pass<decltype(origin)>{copy_, tap_offsets_.data(), taps, plane_end, origin},
                          filter, bias, epilogue, y);
      return;
    }
    // Vector t covers row t / row_vectors, columns from (t % row_vectors) * width.
    const std::int64_t row_vectors = (g_.out_w + width - 1) / width;
    const std::int64_t row_step = g_.stride_h * phases_.pitch, out_w = g_.out_w;
    const auto origin = [=](std::int64_t t) {
      const std::int64_t row = t / row_vectors, col = t % row_vectors * width;
      return conv_vector_origin{row * row_step + col, row * out_w + col};
    };
    conv_depthwise_fold(g_.out_h * row_vectors, conv_depthwise_pass<decltype(origin)>{copy_, tap_offsets_.data(), taps, plane_end, origin},
                        filter, bias, epilogue, y);
  }

 private:
  conv_plane_window g_;
  bool flat_;
  conv_phase_planes phases_;
  conv_flat_planes layout_;
  float* copy_ = nullptr;
  const float* last_x_ = nullptr;
  std::vector<std::int64_t> tap_offsets_;
};

}  // namespace tracemod::kernels::detail
