// Layout kernels: transpose (any permutation of the axes) and concat along one axis.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/kernels/detail/layout_transpose.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace tracemod::kernels {

/// Output shape of transposing `in` by `perm` (output axis i is input axis perm[i], as in
/// PyTorch's permute). Throws value_error, naming `op`, unless perm is a permutation of 0 .. rank - 1.
[[nodiscard]] inline Shape transposed_shape(const Shape& in, std::span<const std::size_t> perm,
                                            std::string_view op = "transpose") {
  std::array<bool, Shape::max_rank> seen{};
  bool valid = perm.size() == in.rank();
  for (std::size_t i = 0; valid && i < perm.size(); ++i) {
    valid = perm[i] < in.rank() && !seen[perm[i]];
    if (valid) seen[perm[i]] = true;
  }
  if (!valid) {
    std::string p = "(";
    for (std::size_t i = 0; i < perm.size(); ++i) p += (i ? ", " : "") + std::to_string(perm[i]);
    throw value_error(std::string(op) + ": " + p + ") is not a permutation of the axes of shape " + in.to_string());
  }
  Shape out;
  for (std::size_t d : perm) out.push_back(in[d]);
  return out;
}

/// y = x with its axes permuted: y has shape transposed_shape(in_shape, perm). Dims of size 1 are
/// dropped and axes that stay adjacent are merged first, so e.g. NCHW -> NHWC runs as a batch of
/// [C, H*W] -> [H*W, C] tiled 2-D transposes, and a permutation keeping the innermost axis copies
/// whole runs. y must not overlap x.
inline void transpose(const float* x, const Shape& in_shape, std::span<const std::size_t> perm, float* y) {
  (void)transposed_shape(in_shape, perm);
  if (in_shape.numel() == 0) return;
  detail::transpose_collapsed(x, y, detail::collapse(in_shape, perm));
}

/// Output shape of concatenating shapes[0, count) along `axis`. Throws value_error for no inputs
/// or an axis out of range, shape_error when ranks differ or extents differ off the axis; the
/// messages name `op`.
[[nodiscard]] inline Shape concat_shape(const Shape* shapes, std::size_t count, std::size_t axis,
                                        std::string_view op = "concat") {
  if (count == 0) throw value_error(std::string(op) + ": needs at least one input");
  const Shape& first = shapes[0];
  if (axis >= first.rank())
    throw value_error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for inputs of rank " +
                      std::to_string(first.rank()) + " (input 0 has shape " + first.to_string() + ")");
  Shape out = first;
  for (std::size_t i = 1; i < count; ++i) {
    const Shape& s = shapes[i];
    bool match = s.rank() == first.rank();
    for (std::size_t d = 0; match && d < s.rank(); ++d) match = d == axis || s[d] == first[d];
    if (!match)
      throw shape_error(std::string(op) + ": input " + std::to_string(i) + " has shape " + s.to_string() + " but input 0 has " +
                        first.to_string() + "; shapes must match except along axis " + std::to_string(axis));
    out[axis] = checked_add(out[axis], s[axis], op, "the joined extent along axis " + std::to_string(axis));
  }
  return out;
}

/// y = the inputs[0, count) (shapes[i] each) laid end to end along `axis`; y has shape
/// concat_shape(shapes, count, axis) and must not overlap any input. Empty inputs may be null.
template <class T>
void concat(const T* const* inputs, const Shape* shapes, std::size_t count, std::size_t axis, T* y) {
  const Shape out = concat_shape(shapes, count, axis);
  if (out.numel() == 0) return;
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= out[d];
  for (std::size_t d = axis + 1; d < out.rank(); ++d) inner *= out[d];
  const std::int64_t row = out[axis] * inner;  // elements of y per outer index
  // The output, split across threads by element ranges: each chunk copies the pieces of the
  // input runs that fall inside it.
  parallel_for(0, outer * row, detail::grains().copy, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t o = lo / row; o * row < hi; ++o) {
      std::int64_t at = o * row;  // where input i's run starts in y
      for (std::size_t i = 0; i < count && at < hi; ++i) {
        const std::int64_t run = shapes[i][axis] * inner;
        const std::int64_t first = std::max(lo, at), last = std::min(hi, at + run);
        if (first < last)
          std::memcpy(y + first, inputs[i] + o * run + (first - at), static_cast<std::size_t>(last - first) * sizeof(T));
        at += run;
      }
    }
  });
}

}  // namespace tracemod::kernels
