// Transpose machinery: reduce a permutation to its essential form, walk index spaces, and copy
// 2-D tiles so that both the reads and the writes of a transpose stay within cache lines.
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace tracemod::kernels::detail {

/// A permuted copy with size-1 dims dropped and input dims that stay adjacent in the output
/// merged: output dim i is input dim perm[i] of a contiguous input with these extents.
struct collapsed_permutation {
  std::size_t rank = 0;
  std::array<std::int64_t, Shape::max_rank> extent{};
  std::array<std::size_t, Shape::max_rank> perm{};
};

/// `perm` is a valid permutation of the axes of `in`.
[[nodiscard]] inline collapsed_permutation collapse(const Shape& in, std::span<const std::size_t> perm) noexcept {
  // Drop size-1 input dims, renumbering the rest.
  std::array<std::size_t, Shape::max_rank> renumber{};
  std::size_t kept = 0;
  for (std::size_t d = 0; d < in.rank(); ++d)
    if (in[d] != 1) renumber[d] = kept++;
  std::array<std::size_t, Shape::max_rank> p{};
  std::array<std::int64_t, Shape::max_rank> ext{};
  std::size_t r = 0;
  for (std::size_t d : perm)
    if (in[d] != 1) {
      p[r++] = renumber[d];
      ext[renumber[d]] = in[d];
    }
  // Runs of consecutive input dims in output order become one dim each.
  std::array<std::size_t, Shape::max_rank> group_first{};
  std::array<std::int64_t, Shape::max_rank> group_extent{};
  std::size_t groups = 0;
  for (std::size_t i = 0; i < r; ++i) {
    if (i > 0 && p[i] == p[i - 1] + 1) {
      group_extent[groups - 1] *= ext[p[i]];
    } else {
      group_first[groups] = p[i];
      group_extent[groups++] = ext[p[i]];
    }
  }
  // Groups in input order give the collapsed input dims: a group's new index is the number of
  // groups that start before it.
  collapsed_permutation c;
  c.rank = groups;
  for (std::size_t g = 0; g < groups; ++g) {
    c.perm[g] = static_cast<std::size_t>(
        std::count_if(group_first.begin(), group_first.begin() + static_cast<std::ptrdiff_t>(groups),
                      [&](std::size_t f) { return f < group_first[g]; }));
    c.extent[c.perm[g]] = group_extent[g];
  }
  return c;
}

/// The offsets along strides a and b of the index number `linear` (row-major) of the `rank`-dim
/// space `extent`.
inline std::array<std::int64_t, 2> offsets_of(std::int64_t linear, std::size_t rank, const std::int64_t* extent,
                                              const std::int64_t* stride_a, const std::int64_t* stride_b) noexcept {
  std::array<std::int64_t, 2> at{0, 0};
  for (std::size_t k = rank; k-- > 0;) {
    const std::int64_t i = linear % extent[k];
    linear /= extent[k];
    at[0] += i * stride_a[k];
    at[1] += i * stride_b[k];
  }
  return at;
}

/// Rows a transpose tile spans.
inline constexpr std::int64_t transpose_tile = 16;

/// y[i + j * y_stride] = x[i * x_stride + j] for i < rows, j < cols, in square tiles: each tile's
/// source rows and destination rows stay in L1 while it is copied.
inline void transpose_tiles(const float* x, float* y, std::int64_t rows, std::int64_t cols, std::int64_t x_stride,
                            std::int64_t y_stride) noexcept {
  constexpr std::int64_t tile = transpose_tile;
  for (std::int64_t i0 = 0; i0 < rows; i0 += tile) {
    const std::int64_t i1 = std::min(rows, i0 + tile);
    for (std::int64_t j0 = 0; j0 < cols; j0 += tile) {
      const std::int64_t j1 = std::min(cols, j0 + tile);
      for (std::int64_t j = j0; j < j1; ++j)
        for (std::int64_t i = i0; i < i1; ++i) y[i + j * y_stride] = x[i * x_stride + j];
    }
  }
}

/// y = x permuted by the collapsed permutation c (numel > 0).
inline void transpose_collapsed(const float* x, float* y, const collapsed_permutation& c) noexcept {
  const std::size_t r = c.rank;
  std::int64_t numel = 1;
  for (std::size_t k = 0; k < r; ++k) numel *= c.extent[k];
  if (r <= 1) {
    std::memcpy(y, x, static_cast<std::size_t>(numel) * sizeof(float));
    return;
  }
  std::array<std::int64_t, Shape::max_rank> in_stride{}, out_extent{}, out_stride{};
  in_stride[r - 1] = 1;
  for (std::size_t k = r - 1; k-- > 0;) in_stride[k] = in_stride[k + 1] * c.extent[k + 1];
  for (std::size_t k = 0; k < r; ++k) out_extent[k] = c.extent[c.perm[k]];
  out_stride[r - 1] = 1;
  for (std::size_t k = r - 1; k-- > 0;) out_stride[k] = out_stride[k + 1] * out_extent[k + 1];

  // The dims other than the two innermost ones (of the input and of the output), in output order.
  const std::size_t in_last = r - 1;
  const std::size_t a = c.perm[r - 1];  // input dim that is contiguous in the output
  std::array<std::int64_t, Shape::max_rank> ext{}, sx{}, sy{};
  std::size_t outer = 0, q = 0;
  for (std::size_t k = 0; k < r; ++k) {
    if (c.perm[k] == in_last) q = k;
    if (k == r - 1 || c.perm[k] == in_last) continue;
    ext[outer] = out_extent[k];
    sx[outer] = in_stride[c.perm[k]];
    sy[outer++] = out_stride[k];
  }
  std::int64_t outer_count = 1;
  for (std::size_t k = 0; k < outer; ++k) outer_count *= ext[k];
  const std::int64_t grain = grains().copy;
  if (a == in_last) {
    // The innermost dim is shared: copy contiguous runs, split across threads.
    const std::int64_t run = c.extent[in_last];
    parallel_for(0, outer_count, grain_in_items(grain, run), [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t i = lo; i < hi; ++i) {
        const auto [ox, oy] = offsets_of(i, outer, ext.data(), sx.data(), sy.data());
        std::memcpy(y + oy, x + ox, static_cast<std::size_t>(run) * sizeof(float));
      }
    });
    return;
  }
  // Items: one band of transpose_tile rows of one 2-D transpose, split across threads.
  const std::int64_t rows = c.extent[a], cols = c.extent[in_last];
  const std::int64_t bands = (rows + transpose_tile - 1) / transpose_tile;
  parallel_for(0, outer_count * bands, grain_in_items(grain, transpose_tile * cols), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t item = lo; item < hi; ++item) {
      const auto [ox, oy] = offsets_of(item / bands, outer, ext.data(), sx.data(), sy.data());
      const std::int64_t i0 = item % bands * transpose_tile;
      transpose_tiles(x + ox + i0 * in_stride[a], y + oy + i0, std::min(transpose_tile, rows - i0), cols,
                      in_stride[a], out_stride[q]);
    }
  });
}

}  // namespace tracemod::kernels::detail
