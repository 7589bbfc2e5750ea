// Transpose machinery: reduce a permutation to its essential form, walk index spaces, and copy
// 2-D tiles so that both the reads and the writes of a transpose stay within cache lines.
#pragma once

#include <tracemod/core/shape.hpp>

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

/// Calls f(offset_a, offset_b) for every index of the `rank`-dim space `extent` in row-major
/// order, the offsets following strides a and b. Rank 0 is one call; an empty space, none.
template <class F>
inline void for_each_index(std::size_t rank, const std::int64_t* extent, const std::int64_t* stride_a,
                           const std::int64_t* stride_b, F&& f) {
  if (std::any_of(extent, extent + rank, [](std::int64_t e) { return e == 0; })) return;
  std::array<std::int64_t, Shape::max_rank> index{};
  std::int64_t a = 0, b = 0;
  for (;;) {
    f(a, b);
    std::size_t k = rank;
    for (;;) {
      if (k == 0) return;
      --k;
      a += stride_a[k];
      b += stride_b[k];
      if (++index[k] < extent[k]) break;
      a -= stride_a[k] * extent[k];
      b -= stride_b[k] * extent[k];
      index[k] = 0;
    }
  }
}

/// y[i + j * y_stride] = x[i * x_stride + j] for i < rows, j < cols, in square tiles: each tile's
/// source rows and destination rows stay in L1 while it is copied.
inline void transpose_tiles(const float* x, float* y, std::int64_t rows, std::int64_t cols, std::int64_t x_stride,
                            std::int64_t y_stride) noexcept {
  constexpr std::int64_t tile = 16;
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
  if (a == in_last) {
    // The innermost dim is shared: copy contiguous runs.
    const auto run = static_cast<std::size_t>(c.extent[in_last]) * sizeof(float);
    for_each_index(outer, ext.data(), sx.data(), sy.data(),
                   [&](std::int64_t ox, std::int64_t oy) { std::memcpy(y + oy, x + ox, run); });
    return;
  }
  for_each_index(outer, ext.data(), sx.data(), sy.data(), [&](std::int64_t ox, std::int64_t oy) {
    transpose_tiles(x + ox, y + oy, c.extent[a], c.extent[in_last], in_stride[a], out_stride[q]);
  });
}

}  // namespace tracemod::kernels::detail
