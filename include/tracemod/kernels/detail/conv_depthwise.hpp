// Direct convolution of one plane by one r x s filter: the depthwise case (one input channel per
// group), where an im2col GEMM would have a reduction of only r * s and mostly pack.
//
// A strided convolution reads every stride_w-th input column. Instead of gathering them, the
// padded copy of the plane the kernel makes anyway is stored de-interleaved: stride_w phase planes,
// phase p holding columns p, p + stride_w, ... Tap (ry, sx) of output column ox then reads column
// ox + sx * dil_w / stride_w of phase sx * dil_w % stride_w, so every read is a unit-stride vector
// load, whatever the stride.
//
// Small planes (copies within max_floats: MobileNetV2's 28x28 and smaller, at stride 1 and 2) are
// instead computed flat: output pixel o = oy * out_w + ox, so the vectors run over the whole output
// plane, not row by row (a 7x7 output is four 16-float vectors, not seven), and are stored as they
// lie. Each tap then reads one copy at a fixed offset from o: at stride 1 with "same" padding the
// plane itself at offset (ry * dil_h - pad_h) * w + sx * dil_w - pad_w; at stride 2 the input rows
// and columns of the tap's phase, at the output's pitch (see conv_flat_planes). A tap that crosses
// the left or right edge wraps into the row above or below: it reads a copy whose wrapped-into
// columns are zero, one copy per distinct phase and column shift (three for a 3x3 filter at stride
// 1, six at stride 2), with zero rows above and below.
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

/// The flat layout of a small plane (see the top of this file). Tap (ry, sx) of output pixel
/// o = oy * out_w + ox reads input row stride_h * (oy + dy) + a, column stride_w * (ox + dx) + b,
/// where ry * dil_h - pad_h = stride_h * dy + a and sx * dil_w - pad_w = stride_w * dx + b
/// (0 <= a < stride_h, 0 <= b < stride_w). Copy (a, b, dx) holds x[stride_h * i + a][stride_w * j + b]
/// at i * out_w + j, zero past the input and in the columns that shift dx wraps into, between
/// `front` and `back` zeros: the tap reads it at o + dy * out_w + dx.
struct conv_flat_planes {
  struct copy_key {
    std::int64_t a, b, dx;
    bool operator==(const copy_key&) const = default;
  };
  std::int64_t rows = 0;         // data rows of a copy: ceil(h / stride_h)
  std::int64_t phase_pitch = 0;  // columns of a column phase of the input: ceil(w / stride_w)
  std::int64_t row_vectors = 0;  // vectors per output row when copying row by row
  std::int64_t vectors = 0, front = 0, region = 0;
  bool contiguous = false;  // stride 1, out_w == w: each copy is the whole plane, masked
  std::vector<copy_key> copies;

  /// Largest copies * rows * out_w that runs flat: the copies stay in L1 while the plane is computed.
  static constexpr std::int64_t max_floats = 3072;

  explicit conv_flat_planes(const conv_plane_window& g)
      : rows((g.h + g.stride_h - 1) / g.stride_h),
        phase_pitch((g.w + g.stride_w - 1) / g.stride_w),
        row_vectors((g.out_w + width() - 1) / width()),
        vectors((g.out_h * g.out_w + width() - 1) / width()),
        contiguous(g.stride_h == 1 && g.stride_w == 1 && g.out_w == g.w && g.h * g.w >= width()) {
    std::int64_t lowest = 0, highest = 0;
    for (std::int64_t ry = 0; ry < g.r; ++ry)
      for (std::int64_t sx = 0; sx < g.s; ++sx) {
        const copy_key k = key(g, ry, sx);
        if (std::find(copies.begin(), copies.end(), k) == copies.end()) copies.push_back(k);
        const std::int64_t offset = row_shift(g, ry) * g.out_w + k.dx;
        lowest = std::min(lowest, offset);
        highest = std::max(highest, offset);
      }
    front = -lowest;
    // The last vector's lanes past the plane are computed (not stored) and read up to
    // vectors * width + highest; copying by rows stores up to a vector past the last row.
    const std::int64_t data = rows * g.out_w;
    region = front + data + std::max(width(), vectors * width() + highest - data);
  }

  static constexpr std::int64_t width() { return static_cast<std::int64_t>(simd_width); }
  static std::int64_t floor_div(std::int64_t n, std::int64_t d) { return n >= 0 ? n / d : -((d - 1 - n) / d); }
  static std::int64_t row_shift(const conv_plane_window& g, std::int64_t ry) {
    return floor_div(ry * g.dil_h - g.pad_h, g.stride_h);
  }
  static copy_key key(const conv_plane_window& g, std::int64_t ry, std::int64_t sx) {
    const std::int64_t ey = ry * g.dil_h - g.pad_h, ex = sx * g.dil_w - g.pad_w;
    const std::int64_t dy = floor_div(ey, g.stride_h), dx = floor_div(ex, g.stride_w);
    return {ey - dy * g.stride_h, ex - dx * g.stride_w, dx};
  }

  /// Whether the plane runs flat: every input column a lane needs lies in its own output row's
  /// span of its copy (never only past its right end), and the copies fit in max_floats.
  [[nodiscard]] bool fits(const conv_plane_window& g) const {
    if (g.out_h * g.out_w < width()) return false;
    for (std::int64_t sx = 0; sx < g.s; ++sx) {
      const copy_key k = key(g, 0, sx);
      for (std::int64_t ox = std::max<std::int64_t>(0, g.out_w - k.dx); ox < g.out_w; ++ox)
        if (g.stride_w * (ox + k.dx) + k.b < g.w) return false;
    }
    return static_cast<std::int64_t>(copies.size()) * rows * g.out_w <= max_floats;
  }

  /// Whether column j of a copy holds data: inside the input, and not wrapped into by shift dx.
  static bool kept(const conv_plane_window& g, const copy_key& k, std::int64_t j) {
    const bool wrapped = k.dx < 0 ? j >= g.out_w + k.dx : j < k.dx;
    return j < g.out_w && g.stride_w * j + k.b < g.w && !wrapped;
  }

  /// Offset of tap (ry, sx) in the buffer from an output pixel's flat index.
  [[nodiscard]] std::int64_t tap_offset(const conv_plane_window& g, std::int64_t ry, std::int64_t sx) const {
    const copy_key k = key(g, ry, sx);
    const auto copy = std::find(copies.begin(), copies.end(), k) - copies.begin();
    return copy * region + front + row_shift(g, ry) * g.out_w + k.dx;
  }

  // The buffer: the copies, the input's column phases (row by row copying only), one mask per copy.
  [[nodiscard]] std::int64_t copy_floats() const { return static_cast<std::int64_t>(copies.size()) * region; }
  [[nodiscard]] std::int64_t phase_floats(const conv_plane_window& g) const {
    return contiguous ? 0 : g.stride_w * g.h * phase_pitch + row_vectors * width();
  }
  [[nodiscard]] std::int64_t mask_floats(const conv_plane_window& g) const {
    return contiguous ? g.h * g.w : row_vectors * width();
  }
  [[nodiscard]] std::int64_t floats(const conv_plane_window& g) const {
    return copy_floats() + phase_floats(g) + static_cast<std::int64_t>(copies.size()) * mask_floats(g);
  }
  [[nodiscard]] float* mask(const conv_plane_window& g, float* buffer, std::size_t copy) const {
    return buffer + copy_floats() + phase_floats(g) + static_cast<std::int64_t>(copy) * mask_floats(g);
  }

  /// Zeroes the copies and writes the masks (all bits set where a column is kept).
  void prepare(const conv_plane_window& g, float* buffer) const {
    std::fill_n(buffer, copy_floats() + phase_floats(g), 0.0f);
    // Contiguous copies mask every row of the plane alike; row by row copies use one row's mask.
    const std::int64_t mask_rows = contiguous ? g.h : 1, mask_columns = contiguous ? g.w : row_vectors * width();
    for (std::size_t c = 0; c < copies.size(); ++c) {
      float* m = mask(g, buffer, c);
      for (std::int64_t j = 0; j < mask_columns; ++j)
        m[j] = std::bit_cast<float>(kept(g, copies[c], j) ? ~0u : 0u);
      for (std::int64_t y = 1; y < mask_rows; ++y) std::copy_n(m, mask_columns, m + y * mask_columns);
    }
  }

  /// Writes the plane x into every copy. Only data positions are written (the zeros stay).
  void write(const conv_plane_window& g, const float* x, float* buffer) const {
    if (contiguous) {
      write_contiguous(g, x, buffer);
      return;
    }
    // Column phase b of the input: row y, column q at phases + (b * h + y) * phase_pitch + q.
    float* const phases = buffer + copy_floats();
    const std::int64_t s = g.stride_w;
    if (s == 1) {
      std::copy_n(x, g.h * g.w, phases);
    } else if (s == 2 && g.w % 2 == 0) {  // one pass over the plane that the compiler vectorises
      float* odd = phases + g.h * phase_pitch;
      for (std::int64_t m = 0, pairs = g.h * g.w / 2; m < pairs; ++m) {
        phases[m] = x[2 * m];
        odd[m] = x[2 * m + 1];
      }
    } else {
      for (std::int64_t y = 0; y < g.h; ++y)
        for (std::int64_t b = 0; b < s; ++b) {
          float* row = phases + (b * g.h + y) * phase_pitch;
          for (std::int64_t col = b, q = 0; col < g.w; col += s, ++q) row[q] = x[y * g.w + col];
        }
    }
    // Copy rows by whole vectors: the lanes past out_w are masked to zero and spill into the next
    // row, written after, or into the zeros after the last.
    for (std::size_t c = 0; c < copies.size(); ++c) {
      const copy_key& k = copies[c];
      float* dst = buffer + static_cast<std::int64_t>(c) * region + front;
      const float* m = mask(g, buffer, c);
      for (std::int64_t i = 0; g.stride_h * i + k.a < g.h; ++i) {
        const float* src = phases + (k.b * g.h + g.stride_h * i + k.a) * phase_pitch;
        for (std::int64_t v = 0; v < row_vectors; ++v)
          xsimd::bitwise_and(fbatch::load_unaligned(src + v * width()), fbatch::load_unaligned(m + v * width()))
              .store_unaligned(dst + i * g.out_w + v * width());
      }
    }
  }

  /// Stride 1, out_w == w: each copy is the plane masked, by whole vectors, the last one ending at
  /// the plane's end (overlapping its predecessor).
  void write_contiguous(const conv_plane_window& g, const float* x, float* buffer) const {
    const std::int64_t plane = g.h * g.w;
    for (std::size_t c = 0; c < copies.size(); ++c) {
      float* dst = buffer + static_cast<std::int64_t>(c) * region + front;
      const float* m = mask(g, buffer, c);
      for (std::int64_t i = 0;; i += width()) {
        i = std::min(i, plane - width());
        fbatch v = fbatch::load_unaligned(x + i);
        if (copies[c].dx != 0) v = xsimd::bitwise_and(v, fbatch::load_unaligned(m + i));
        v.store_unaligned(dst + i);
        if (i == plane - width()) break;
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
      : g_(g), layout_(g), flat_(layout_.fits(g)), phases_(g) {
    const std::int64_t floats = flat_ ? layout_.floats(g) : phases_.floats();
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
        layout_.write(g_, x, copy_);
      else
        conv_deinterleave_plane(g_, phases_, x, copy_);
      last_x_ = x;
    }
    const std::int64_t taps = g_.r * g_.s, plane_end = g_.out_h * g_.out_w;
    if (flat_) {
      // The last vector ends at the plane's end, recomputing some of its predecessor's outputs
      // (to the same bits): every store and residual load is a whole vector.
      const std::int64_t last = plane_end - width;
      const auto origin = [last](std::int64_t t) {
        const std::int64_t at = std::min(t * width, last);
        return conv_vector_origin{at, at};
      };
      conv_depthwise_fold(layout_.vectors,
                          conv_depthwise_pass<decltype(origin)>{copy_, tap_offsets_.data(), taps, plane_end, origin},
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
    conv_depthwise_fold(g_.out_h * row_vectors,
                        conv_depthwise_pass<decltype(origin)>{copy_, tap_offsets_.data(), taps, plane_end, origin},
                        filter, bias, epilogue, y);
  }

 private:
  conv_plane_window g_;
  conv_flat_planes layout_;
  bool flat_;
  conv_phase_planes phases_;
  float* copy_ = nullptr;
  const float* last_x_ = nullptr;
  std::vector<std::int64_t> tap_offsets_;
};

}  // namespace tracemod::kernels::detail
