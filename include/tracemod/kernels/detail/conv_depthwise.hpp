// Direct convolution of planes by one r x s filter each: the depthwise case (one input channel per
// group), where an im2col GEMM would have a reduction of only r * s and mostly pack.
//
// Planes whose block fits half of L2 (up to 56x56 with AVX-512 and a 1 MiB L2) run channel-blocked:
// simd_width planes at once, each vector lane one plane.
// The planes are transposed in registers into a padded copy whose pixel (y, x) is one vector of the
// planes' values, so every tap of every output pixel is one aligned vector load and one FMA with a
// vector of the planes' filter values, at any stride and dilation: no lane is wasted on a plane's
// edge, no copy is masked or de-interleaved, and the loads read what was stored as whole vectors.
// The output pixels, one vector each, are transposed back into the planes, where the epilogue
// (residual, activation) runs on the stored vectors.
//
// Larger planes are computed one at a time, row by row. A strided convolution reads every
// stride_w-th input column: instead of gathering them, the padded copy of the plane is stored
// de-interleaved, stride_w phase planes, phase p holding columns p, p + stride_w, ... Tap (ry, sx)
// of output column ox then reads column ox + sx * dil_w / stride_w of phase sx * dil_w % stride_w,
// so every read is a unit-stride vector load, whatever the stride.
//
// Either way each output is the bias plus the taps in row-major order (the padding's zeros
// included), then the residual, then the activation: the same bits whichever planes share a block,
// so whatever the thread count.
#pragma once

#include <tracemod/kernels/detail/activation.hpp>
#include <tracemod/kernels/detail/cache_sizes.hpp>
#include <tracemod/kernels/detail/conv_tap_offsets.hpp>
#include <tracemod/kernels/detail/gemm_workspace.hpp>
#include <tracemod/kernels/detail/simd_transpose.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace tracemod::kernels::detail {

struct conv_plane_window {
  std::int64_t h, w, out_h, out_w;
  std::int64_t r, s;
  std::int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;

  bool operator==(const conv_plane_window&) const = default;
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

/// Writes the w floats of `src`, an input row padded by pad_w columns on the left, into its
/// stride_w phase rows at dst + p * phase_stride: padded column j goes to phase j % stride_w,
/// position j / stride_w. Only data positions are written, not the padding's.
inline void conv_deinterleave_row(const float* src, std::int64_t w, std::int64_t pad_w, std::int64_t stride_w,
                                  float* dst, std::int64_t phase_stride) {
  const std::int64_t s = stride_w;
  if (s == 1) {
    std::copy_n(src, w, dst + pad_w);
    return;
  }
  if (s == 2) {  // one sequential pass that the compiler turns into vector shuffles
    const std::int64_t odd = pad_w % 2;  // input column 0 lands in phase pad_w % 2
    float* even_phase = dst + odd * phase_stride + pad_w / 2;
    float* odd_phase = dst + (1 - odd) * phase_stride + (pad_w + 1) / 2;
    const std::int64_t pairs = w / 2;
    for (std::int64_t q = 0; q < pairs; ++q) {
      even_phase[q] = src[2 * q];
      odd_phase[q] = src[2 * q + 1];
    }
    if (w % 2 != 0) even_phase[pairs] = src[w - 1];
    return;
  }
  // Phase p holds the padded columns p, p + s, ...: input columns p - pad_w, p - pad_w + s, ...
  for (std::int64_t p = 0; p < s; ++p) {
    const std::int64_t first = (p - pad_w % s + s) % s;  // first input column of phase p
    float* phase = dst + p * phase_stride + (first + pad_w) / s;
    for (std::int64_t col = first, q = 0; col < w; col += s, ++q) phase[q] = src[col];
  }
}

/// Writes x (h x w) into `dst` laid out as `planes` describes. Only data positions are written: the
/// padding and slack must already be zero, and stay so from one plane to the next.
inline void conv_deinterleave_plane(const conv_plane_window& g, const conv_phase_planes& planes, const float* x,
                                    float* dst) {
  for (std::int64_t y = 0; y < g.h; ++y)
    conv_deinterleave_row(x + y * g.w, g.w, g.pad_w, planes.phases, dst + (g.pad_h + y) * planes.pitch,
                          planes.rows * planes.pitch);
}

// These two are forced inline: otherwise GCC 12 calls them out of line from the row-by-row vectors
// once the channel-blocked code shares the caller, about 10 % slower on the 112x112 planes.

/// The first `count` lanes of x to out.
[[gnu::always_inline]] inline void conv_store_columns(const fbatch& x, std::int64_t count, float* out) {
  if (count == static_cast<std::int64_t>(simd_width)) {
    x.store_unaligned(out);
    return;
  }
  alignas(buffer_alignment) std::array<float, simd_width> lanes;
  x.store_aligned(lanes.data());
  std::copy_n(lanes.data(), count, out);
}

/// The first `count` floats at `in` as a vector, the other lanes zero.
[[gnu::always_inline]] inline fbatch conv_load_columns(const float* in, std::int64_t count) {
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

/// Where an output vector of a plane reads its taps from (offset into the copy) and stores to.
struct conv_vector_origin {
  std::int64_t input, output;
};

/// One plane's computation in the de-interleaved layout: the copy, the tap offsets from a vector's
/// origin, and the vectors' grid.
struct conv_depthwise_pass {
  const float* copy;
  const std::int64_t* tap_offsets;
  std::int64_t taps;
  std::int64_t row_vectors, row_step, out_w;
  std::int64_t plane_end;  // out_h * out_w

  /// Vector t covers output row t / row_vectors, columns from (t % row_vectors) * simd_width.
  [[nodiscard]] conv_vector_origin origin(std::int64_t t) const {
    const std::int64_t row = t / row_vectors, col = t % row_vectors * static_cast<std::int64_t>(simd_width);
    return {row * row_step + col, row * out_w + col};
  }
};

/// Output vectors t0 + J of a plane: each accumulates in its own register through all taps, so the
/// J independent chains hide the FMA latency. The epilogue runs on the registers.
template <std::int64_t... J>
inline void conv_depthwise_vectors(std::integer_sequence<std::int64_t, J...>, std::int64_t t0,
                                   const conv_depthwise_pass& pass, const float* filter, float bias,
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
template <std::int64_t Chains>
inline void conv_depthwise_tail(std::int64_t t, std::int64_t vectors, const conv_depthwise_pass& pass,
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
inline void conv_depthwise_fold(std::int64_t vectors, const conv_depthwise_pass& pass, const float* filter,
                                float bias, const conv_plane_epilogue& epilogue, float* y) {
  constexpr std::int64_t chains = 8;
  std::int64_t t = 0;
  for (; t + chains <= vectors; t += chains)
    conv_depthwise_vectors(std::make_integer_sequence<std::int64_t, chains>{}, t, pass, filter, bias, epilogue, y);
  conv_depthwise_tail<chains>(t, vectors, pass, filter, bias, epilogue, y);
}

/// One plane of a depthwise convolution: input, filter (r * s taps), bias, output and the residual
/// added before the activation (laid out like the output; null for none).
struct conv_depthwise_plane {
  const float* x;
  const float* filter;
  float bias;
  float* y;
  const float* residual;
};

/// Prefetches, for writing, the output planes of the block after the current one while the current
/// one computes, a share of the lines per output row (step()). The simd_width planes of a block are
/// written as as many interleaved streams; when each is only a few lines long the hardware
/// prefetcher does not pick them up, and a cold output (the network's case) misses on every line.
/// Only for planes stored one after the other (a depthwise layer's) of 8 to 16 lines, where it
/// measured faster (MobileNetV2's 14x14 outputs, chained: 15-25 %); on 7x7 outputs it gained
/// nothing and cost 5-10 % with the outputs in cache, on 28x28 and larger it lost.
class conv_output_prefetch {
 public:
  static constexpr std::int64_t min_plane_floats = 128, max_plane_floats = 256;

  conv_output_prefetch(const conv_depthwise_plane* next, std::int64_t next_count, std::int64_t out_plane,
                       std::int64_t steps) {
    if (next_count == 0 || out_plane < min_plane_floats || out_plane > max_plane_floats) return;
    for (std::int64_t c = 1; c < next_count; ++c)
      if (next[c].y != next[0].y + c * out_plane) return;
    line_ = next[0].y;
    end_ = line_ + next_count * out_plane;
    per_step_ = ((end_ - line_ + line_floats - 1) / line_floats + steps - 1) / steps * line_floats;
  }

  void step() {
    const float* const stop = std::min(end_, line_ + per_step_);
    for (; line_ < stop; line_ += line_floats) __builtin_prefetch(line_, 1, 2);
  }

 private:
  static constexpr std::int64_t line_floats = 16;  // 64-byte lines
  const float* line_ = nullptr;
  const float* end_ = nullptr;
  std::int64_t per_step_ = 0;
};

/// The channel-blocked layout (see the top of this file) for `simd_width` planes of one window: the
/// padded input, pixel (y, x) at input + (y * padded_w + x) * width; the output, pixel o at
/// output + o * width; the filters, tap t at filters + t * width, then the biases.
class conv_channel_block {
 public:
  /// Largest buffer that runs channel-blocked: half of L2 (the planes streaming in and out use the
  /// rest), 512 KiB with a 1 MiB L2: up to 56x56 planes at stride 1 and 2 with AVX-512.
  [[nodiscard]] static std::int64_t max_floats() {
    return cache_sizes().l2 / 2 / static_cast<std::int64_t>(sizeof(float));
  }

  /// The tap table is set up only for a window that fits.
  explicit conv_channel_block(const conv_plane_window& g)
      : g_(g), padded_w_(g.w + 2 * g.pad_w), in_floats_((g.h + 2 * g.pad_h) * padded_w_ * width),
        out_floats_(g.out_h * g.out_w * width), blocks_((g.out_w + max_chains - 1) / max_chains) {
    if (fits())
      tap_at_ = conv_tap_offsets(g, 1, g.r, g.s, [this](std::int64_t, std::int64_t ry, std::int64_t sx) {
        return (ry * g_.dil_h * padded_w_ + sx * g_.dil_w) * width;
      });
  }

  [[nodiscard]] std::int64_t floats() const { return in_floats_ + out_floats_ + (g_.r * g_.s + 1) * width; }
  [[nodiscard]] bool fits() const { return floats() <= max_floats(); }

  /// Zeroes the buffer: the padding stays zero from one block to the next.
  void prepare(float* buffer) const { std::fill_n(buffer, floats(), 0.0f); }

  /// planes[0, count), count <= width, with activation `act`; prefetches next[0, next_count) (the
  /// planes of the following call, none if next_count is 0) while it computes. Not inlined, nor is
  /// the row-by-row plane: inlined into one caller, GCC 12 spilled the row-by-row accumulators to
  /// the stack (the 112x112 layers 2x slower) and the channel-blocked code measured slower too.
  [[gnu::noinline]] void operator()(const conv_depthwise_plane* planes, std::int64_t count,
                                    const conv_depthwise_plane* next, std::int64_t next_count, activation act,
                                    float* buffer) const {
    float* const input = buffer;
    float* const output = buffer + in_floats_;
    float* const filters = output + out_floats_;
    const std::int64_t taps = g_.r * g_.s;
    for (std::int64_t c = 0; c < count; ++c) {
      for (std::int64_t t = 0; t < taps; ++t) filters[t * width + c] = planes[c].filter[t];
      filters[taps * width + c] = planes[c].bias;
    }
    // Input pixels, a vector of each plane at a time; a plane's last vector ends at its end. Pixel
    // (y, x) goes to padded pixel (y + pad_h, x + pad_w).
    const std::int64_t in_plane = g_.h * g_.w, in_step = std::min(width, in_plane);
    for (std::int64_t next_pixel = 0; next_pixel < in_plane; next_pixel += in_step) {
      const std::int64_t p = std::min(next_pixel, in_plane - in_step);
      std::array<fbatch, simd_width> v;
      for (std::int64_t c = 0; c < width; ++c)
        v[c] = c < count ? conv_load_columns(planes[c].x + p, in_step) : fbatch(0.0f);
      transpose_square(v);
      std::int64_t x = p % g_.w;
      float* to = input + ((p / g_.w + g_.pad_h) * padded_w_ + x + g_.pad_w) * width;
      for (std::int64_t j = 0; j < in_step; ++j) {
        v[j].store_aligned(to);
        to += width;
        if (++x == g_.w) {
          x = 0;
          to += 2 * g_.pad_w * width;
        }
      }
    }
    // Output rows in blocks of at most max_chains pixels, as even as the row allows.
    conv_output_prefetch prefetch(next, next_count, g_.out_h * g_.out_w, g_.out_h);
    const std::int64_t row_step = g_.stride_h * padded_w_ * width, column_step = g_.stride_w * width;
    for (std::int64_t oy = 0; oy < g_.out_h; ++oy) {
      prefetch.step();
      for (std::int64_t b = 0, ox = 0; b < blocks_; ++b) {
        const std::int64_t pixels = (g_.out_w - ox) / (blocks_ - b);
        pixel_block<max_chains>(pixels, input + oy * row_step + ox * column_step, column_step, filters,
                                output + (oy * g_.out_w + ox) * width);
        ox += pixels;
      }
    }
    // Back to the planes, a vector of each at a time, with the epilogue on the transposed vectors.
    const std::int64_t out_plane = g_.out_h * g_.out_w, out_step = std::min(width, out_plane);
    for (std::int64_t next_pixel = 0; next_pixel < out_plane; next_pixel += out_step) {
      const std::int64_t o = std::min(next_pixel, out_plane - out_step);
      std::array<fbatch, simd_width> v;
      for (std::int64_t j = 0; j < width; ++j) v[j] = fbatch::load_aligned(output + (o + std::min(j, out_step - 1)) * width);
      transpose_square(v);
      for (std::int64_t c = 0; c < count; ++c) {
        if (planes[c].residual != nullptr) v[c] = v[c] + conv_load_columns(planes[c].residual + o, out_step);
        if (act != activation::none) v[c] = activate(act, v[c]);
        conv_store_columns(v[c], out_step, planes[c].y + o);
      }
    }
  }

 private:
  static constexpr auto width = static_cast<std::int64_t>(simd_width);
  static constexpr std::int64_t max_chains = 8;

  /// `pixels` adjacent output pixels of a row, each accumulating in its own register through all
  /// taps (independent chains that hide the FMA latency).
  template <std::int64_t Chains>
  void pixel_block(std::int64_t pixels, const float* in, std::int64_t column_step, const float* filters,
                   float* out) const {
    if constexpr (Chains > 0) {
      if (pixels == Chains)
        chains(std::make_integer_sequence<std::int64_t, Chains>{}, in, column_step, filters, out);
      else
        pixel_block<Chains - 1>(pixels, in, column_step, filters, out);
    }
  }

  template <std::int64_t... J>
  void chains(std::integer_sequence<std::int64_t, J...>, const float* in, std::int64_t column_step,
              const float* filters, float* out) const {
    const std::int64_t taps = g_.r * g_.s;
    std::array<fbatch, sizeof...(J)> acc;
    const fbatch bias = fbatch::load_aligned(filters + taps * width);
    ((acc[J] = bias), ...);
    for (std::int64_t t = 0; t < taps; ++t) {
      const fbatch weight = fbatch::load_aligned(filters + t * width);
      const float* tap = in + tap_at_[t];
      ((acc[J] = xsimd::fma(weight, fbatch::load_aligned(tap + J * column_step), acc[J])), ...);
    }
    (acc[J].store_aligned(out + J * width), ...);
  }

  conv_plane_window g_;
  std::int64_t padded_w_, in_floats_, out_floats_, blocks_;
  const std::int64_t* tap_at_ = nullptr;  // tap t -> its offset from an output pixel's origin
};

/// y = act(bias + x (*) filter + residual) for planes of one window on one thread: the layout
/// (channel-blocked or de-interleaved rows), its padding and the tap offsets are set up once.
class conv_depthwise_kernel {
 public:
  explicit conv_depthwise_kernel(const conv_plane_window& g) : g_(g), block_(g), blocked_(block_.fits()), phases_(g) {
    if (blocked_) {
      buffer_ = scratch(scratch_slot::conv_input, static_cast<std::size_t>(block_.floats()));
      block_.prepare(buffer_);
      return;
    }
    const std::int64_t floats = phases_.floats();
    buffer_ = scratch(scratch_slot::conv_input, static_cast<std::size_t>(floats));
    std::fill_n(buffer_, floats, 0.0f);
    tap_offsets_ = conv_tap_offsets(g, 1, g.r, g.s, [this](std::int64_t, std::int64_t ry, std::int64_t sx) {
      return phases_.tap_offset(g_, ry, sx);
    });
  }

  /// Planes plane(lo) .. plane(hi - 1), each a conv_depthwise_plane, with activation `act`.
  template <class Planes>
  void operator()(std::int64_t lo, std::int64_t hi, const Planes& plane, activation act) {
    if (!blocked_) {
      for (std::int64_t p = lo; p < hi; ++p) row_by_row(plane(p), act);
      return;
    }
    constexpr auto width = static_cast<std::int64_t>(simd_width);
    // Blocks of simd_width planes, each computed while the next one's planes are prefetched.
    std::array<std::array<conv_depthwise_plane, simd_width>, 2> blocks;
    const auto fill = [&](std::array<conv_depthwise_plane, simd_width>& block, std::int64_t first) {
      const std::int64_t count = std::clamp(hi - first, std::int64_t{0}, width);
      for (std::int64_t c = 0; c < count; ++c) block[static_cast<std::size_t>(c)] = plane(first + c);
      return count;
    };
    std::int64_t count = fill(blocks[0], lo);
    for (std::int64_t p = lo, i = 0; p < hi; i ^= 1) {
      const std::int64_t next_count = fill(blocks[i ^ 1], p + count);
      block_(blocks[i].data(), count, blocks[i ^ 1].data(), next_count, act, buffer_);
      p += count;
      count = next_count;
    }
  }

 private:
  /// One plane in the de-interleaved layout. Consecutive planes with the same x (several filters
  /// per channel) copy it once.
  [[gnu::noinline]] void row_by_row(const conv_depthwise_plane& plane, activation act) {
    constexpr auto width = static_cast<std::int64_t>(simd_width);
    if (plane.x != last_x_) {
      conv_deinterleave_plane(g_, phases_, plane.x, buffer_);
      last_x_ = plane.x;
    }
    const std::int64_t row_vectors = (g_.out_w + width - 1) / width;
    conv_depthwise_fold(g_.out_h * row_vectors,
                        conv_depthwise_pass{buffer_, tap_offsets_, g_.r * g_.s, row_vectors,
                                            g_.stride_h * phases_.pitch, g_.out_w, g_.out_h * g_.out_w},
                        plane.filter, plane.bias, conv_plane_epilogue{plane.residual, act}, plane.y);
  }

  conv_plane_window g_;
  conv_channel_block block_;
  bool blocked_;
  conv_phase_planes phases_;
  float* buffer_ = nullptr;
  const float* last_x_ = nullptr;
  const std::int64_t* tap_offsets_ = nullptr;
};

}  // namespace tracemod::kernels::detail
