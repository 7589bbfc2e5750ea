// Quantized GEMM: C[m, n] = requantize(sum_k (A[m, k] - z_a) * B[k, n]), A uint8 activations with
// zero point z_a, B int8 symmetric weights packed once (int8_packed_b), with the requantizing
// epilogue fused into the store: per-tensor or per-output-channel multiplier, int32 bias, output
// zero point and clamp, to uint8 / int8, or float32 (dequantized), or raw int32. docs/kernels.md,
// "int8 GEMM", has the layouts and the rounding rule.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/detail/cache_sizes.hpp>
#include <tracemod/kernels/detail/int8_gemm_amx.hpp>
#include <tracemod/kernels/detail/int8_gemm_kernels.hpp>
#include <tracemod/kernels/detail/int8_gemm_pack.hpp>
#include <tracemod/kernels/detail/int8_gemm_store.hpp>
#include <tracemod/kernels/detail/parallel_grain.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>

namespace tracemod::kernels {

namespace detail {

/// The micro-kernel this translation unit's target selects (int8_gemm_kernels.hpp, int8_gemm_amx.hpp).
#if defined(TRACEMOD_INT8_AMX)
using int8_isa = int8_isa_amx;
#elif defined(__AVX512VNNI__) && defined(__AVX512BW__)
using int8_isa = int8_isa_avx512_vnni;
#elif defined(__AVX2__)
using int8_isa = int8_isa_avx2;
#else
using int8_isa = int8_isa_scalar;
#endif

inline std::string int8_dims(std::int64_t rows, std::int64_t cols) {
  return std::to_string(rows) + "x" + std::to_string(cols);
}

}  // namespace detail

/// B (k x n int8 weights) packed once for every later int8_gemm through the micro-kernel `Isa`, with
/// its column sums (the activation zero point's correction z_a * colsum(B)[j]). Use the alias
/// int8_packed_b (the kernel the compile target selects); other Isa are for tests and dispatch.
template <class Isa>
class basic_int8_packed_b {
 public:
  using isa = Isa;

  /// B is k x n at b, element (p, j) at b[p * ldb + j]; or with trans_b, B^T is stored (n x k, e.g.
  /// nn.Linear's [out_features, in_features] weight): element (p, j) at b[j * ldb + p].
  basic_int8_packed_b(std::int64_t k, std::int64_t n, const std::int8_t* b, std::int64_t ldb, bool trans_b = false)
      : k_(k), n_(n) {
    if (k < 0 || n < 0)
      throw value_error("int8_packed_b: sizes must be non-negative, got K=" + std::to_string(k) +
                        " N=" + std::to_string(n));
    const std::int64_t row_width = trans_b ? k : n;
    if ((trans_b ? n : k) > 0 && ldb < row_width)
      throw value_error("int8_packed_b: ldb=" + std::to_string(ldb) + " is smaller than the " +
                        std::to_string(row_width) + " columns of the stored " +
                        detail::int8_dims(trans_b ? n : k, trans_b ? k : n) + " matrix");
    const std::int64_t padded_n = panels() * Isa::nr;
    data_ = detail::int8_allocate<typename Isa::b_type>(static_cast<std::size_t>(panel_size() * panels()));
    colsum_ = detail::int8_allocate<std::int32_t>(static_cast<std::size_t>(padded_n));
    std::fill_n(colsum_.get(), padded_n, 0);
    detail::int8_pack_b<Isa>(k, n, b, trans_b ? 1 : ldb, trans_b ? ldb : 1, data_.get(), colsum_.get());
  }

  [[nodiscard]] std::int64_t k() const noexcept { return k_; }
  [[nodiscard]] std::int64_t n() const noexcept { return n_; }
  /// NR-wide panels, the last zero-padded.
  [[nodiscard]] std::int64_t panels() const noexcept { return (n_ + Isa::nr - 1) / Isa::nr; }
  /// Elements of one panel: groups x NR x kgroup.
  [[nodiscard]] std::int64_t panel_size() const noexcept { return detail::int8_groups<Isa>(k_) * Isa::nr * Isa::kgroup; }
  [[nodiscard]] const typename Isa::b_type* panel(std::int64_t q) const noexcept { return data_.get() + q * panel_size(); }
  /// sum_p B(p, j), n values (zeros after them up to whole panels).
  [[nodiscard]] const std::int32_t* column_sums() const noexcept { return colsum_.get(); }

 private:
  std::int64_t k_, n_;
  detail::int8_aligned_array<typename Isa::b_type> data_;
  detail::int8_aligned_array<std::int32_t> colsum_;
};

using int8_packed_b = basic_int8_packed_b<detail::int8_isa>;

/// The epilogue of int8_gemm. With raw = sum_k (A[i, k] - a_zero_point) * B[k, j] + bias[j] (int32):
/// - uint8 / int8 output: clamp(nearbyint(float(raw) * M_j) + out_zero_point, qmin, qmax), M_j =
///   s_a * s_w[j] / s_out from `multiplier` (1 value: per tensor; n: per output channel); qmin and
///   qmax default to the output type's range; relu is qmin = out_zero_point, relu6 also
///   qmax = out_zero_point + round(6 / s_out).
/// - float output: float(raw) * M_j (M_j = s_a * s_w[j] dequantizes); no zero point, no clamp.
/// - int32 output: raw; no multiplier, zero point or clamp.
struct int8_gemm_epilogue {
  std::int32_t a_zero_point = 0;           ///< z_a, in [0, 255]
  const std::int32_t* bias = nullptr;      ///< n values, or null
  std::span<const float> multiplier = {};  ///< M_j: positive and finite
  std::int32_t out_zero_point = 0;
  std::optional<std::int32_t> qmin = {}, qmax = {};
};

namespace detail {

template <class Out>
void int8_check_epilogue(std::int64_t n, const int8_gemm_epilogue& e) {
  const auto fail = [](const std::string& what) { throw value_error("int8_gemm: " + what); };
  if (e.a_zero_point < 0 || e.a_zero_point > 255)
    fail("the activation zero point " + std::to_string(e.a_zero_point) + " is outside uint8's [0, 255]");
  constexpr bool quantized = !std::is_same_v<Out, float> && !std::is_same_v<Out, std::int32_t>;
  if constexpr (std::is_same_v<Out, std::int32_t>) {
    if (!e.multiplier.empty() || e.out_zero_point != 0 || e.qmin || e.qmax)
      fail("int32 output takes no multiplier, output zero point or clamp");
    return;
  }
  const auto size = static_cast<std::int64_t>(e.multiplier.size());
  if (size != 1 && size != n)
    fail(std::to_string(size) + " multipliers for N=" + std::to_string(n) + " output channels (give 1 or N)");
  for (std::int64_t j = 0; j < size; ++j) {
    const float m = e.multiplier[static_cast<std::size_t>(j)];
    if (!(m > 0.0f) || !std::isfinite(m))
      fail("multiplier[" + std::to_string(j) + "] = " + std::to_string(m) + " is not positive and finite");
  }
  if constexpr (!quantized) {
    if (e.out_zero_point != 0 || e.qmin || e.qmax) fail("float output takes no output zero point or clamp");
  } else {
    constexpr std::int32_t lo = std::numeric_limits<Out>::min(), hi = std::numeric_limits<Out>::max();
    const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    if (e.out_zero_point < lo || e.out_zero_point > hi)
      fail("the output zero point " + std::to_string(e.out_zero_point) + " is outside the output type's " + range);
    const std::int32_t qmin = e.qmin.value_or(lo), qmax = e.qmax.value_or(hi);
    if (qmin < lo || qmax > hi || qmin > qmax)
      fail("the clamp [" + std::to_string(qmin) + ", " + std::to_string(qmax) + "] is not an ordered range within " +
           range);
  }
}

/// Work of one (column block, row panel) item in the unit of grains().gemm_flops: an int8
/// multiply-add runs about four times as fast as a float one, so it counts half a flop.
inline std::int64_t int8_item_cost(std::int64_t mr, std::int64_t columns, std::int64_t k) { return mr * columns * k / 2; }

/// Row panels that run against a panel of B in turn while it is in L1.
inline constexpr std::int64_t int8_row_group = 8;

/// The product proper, after validation: m, n > 0. Items are (column block, row panel) pairs,
/// column blocks outer; a column block is at most as many panels of B as fill half of L2, and there
/// are at least as many blocks as threads per row panel (when B has the panels). A thread takes its
/// items in runs of up to int8_row_group row panels of one block, packs them into its scratch
/// unless A is read in place, and runs them against each panel of the block in turn, each tile over
/// all of k in registers and stored through the epilogue. Every output element is computed by
/// one tile with the same instructions wherever the items split, and integer sums are exact: the
/// same bits at any thread count.
template <class Isa, class Out>
void int8_gemm_run(std::int64_t m, std::int64_t n, const std::uint8_t* a, std::int64_t lda,
                   const basic_int8_packed_b<Isa>& b, const int8_store_params& params, Out* c, std::int64_t ldc) {
  constexpr std::int64_t mr = Isa::mr, nr = Isa::nr;
  const std::int64_t k = b.k(), groups = int8_groups<Isa>(k), panels = b.panels();
  const std::int64_t row_panels = (m + mr - 1) / mr;
  const std::int64_t panel_bytes = std::max<std::int64_t>(b.panel_size() * std::int64_t{sizeof(typename Isa::b_type)}, 1);
  const std::int64_t max_block = std::max<std::int64_t>(cache_sizes().l2 / 2 / panel_bytes, 1);
  // With fewer row panels than threads (a batch-1 nn.Linear), finer column blocks give every
  // thread work; the blocks only group tiles, so this does not change any tile's sums.
  const std::int64_t threads_short = (get_num_threads() + row_panels - 1) / row_panels;
  const std::int64_t blocks = std::min(panels, std::max((panels + max_block - 1) / max_block, threads_short));
  const std::int64_t block = (panels + blocks - 1) / blocks;
  const std::int64_t grain = grain_in_items(grains().gemm_flops, int8_item_cost(mr, block * nr, k));
  // Rows of A whose groups are whole and of the kernel's element type are read in place; others
  // (k not a multiple of the group, or a kernel widening A) are packed a row panel at a time.
  constexpr bool same_type = std::is_same_v<typename Isa::a_type, std::uint8_t>;
  const bool in_place = same_type && k % Isa::kgroup == 0;
  const std::int64_t panel_elems = groups * mr * Isa::kgroup;
  parallel_for(0, blocks * row_panels, grain, [&](std::int64_t lo, std::int64_t hi) {
    typename Isa::a_type* const a_panels =
        in_place ? nullptr : int8_scratch<typename Isa::a_type>(static_cast<std::size_t>(int8_row_group * panel_elems));
    if constexpr (requires { Isa::begin(); }) Isa::begin();  // per-thread state (AMX's tile configuration)
    for (std::int64_t item = lo; item < hi;) {
      const std::int64_t q0 = item / row_panels * block, q_end = std::min(panels, q0 + block);
      const std::int64_t first = item % row_panels;
      const std::int64_t last = std::min({row_panels, first + int8_row_group, first + (hi - item)});
      if (!in_place)
        for (std::int64_t r = first; r < last; ++r)
          int8_pack_a<Isa>(a, lda, r * mr, std::min(mr, m - r * mr), k, a_panels + (r - first) * panel_elems);
      for (std::int64_t q = q0; q < q_end; ++q) {
        const std::int64_t j0 = q * nr, cols = std::min(nr, n - j0);
        for (std::int64_t r = first; r < last; ++r) {
          const std::int64_t i0 = r * mr;
          const typename Isa::a_type* a_rows = in_place ? nullptr : a_panels + (r - first) * panel_elems;
          std::int64_t a_rs = Isa::kgroup, a_gs = mr * Isa::kgroup;
          if constexpr (same_type) {
            if (in_place) {
              a_rows = a + i0 * lda;
              a_rs = lda;
              a_gs = Isa::kgroup;
            }
          }
          int8_tiles<Isa, Out>[static_cast<std::size_t>(std::min(mr, m - i0) - 1)](
              groups, a_rows, a_rs, a_gs, b.panel(q), params, j0, cols, c + i0 * ldc + j0, ldc);
        }
      }
      item += last - first;
    }
    if constexpr (requires { Isa::end(); }) Isa::end();
  });
}

}  // namespace detail

/// C[i, j] = epilogue(sum_p (A[i, p] - z_a) * B[p, j]) for i < m, j < n: A is m x k uint8, row-major
/// with row stride lda; B the packed weights (k = b.k(), n = b.n()); C row-major with row stride ldc,
/// of the output type chosen by the pointer (uint8_t, int8_t, float, int32_t; see
/// int8_gemm_epilogue). Sums are exact in int32 for k <= 65536 (|a b| <= 255 x 128); beyond that,
/// and when the bias takes raw out of int32, they wrap modulo 2^32. Runs on tmod::get_num_threads()
/// threads with the same bits at any count. Throws shape_error when A's k is not B's, value_error
/// for negative sizes, leading dimensions below the row width, or a bad epilogue (see
/// int8_check_epilogue), before writing anything.
template <class Isa, class Out>
  requires detail::int8_gemm_output<Out>
void int8_gemm(std::int64_t m, std::int64_t k, const std::uint8_t* a, std::int64_t lda,
               const basic_int8_packed_b<Isa>& b, const int8_gemm_epilogue& epilogue, Out* c, std::int64_t ldc) {
  const std::int64_t n = b.n();
  if (m < 0 || k < 0)
    throw value_error("int8_gemm: sizes must be non-negative, got M=" + std::to_string(m) + " K=" + std::to_string(k));
  if (k != b.k())
    throw shape_error("int8_gemm: A is " + detail::int8_dims(m, k) + " but the packed B is " +
                      detail::int8_dims(b.k(), n) + " (K differs)");
  if (m > 0 && lda < k)
    throw value_error("int8_gemm: lda=" + std::to_string(lda) + " is smaller than the K=" + std::to_string(k) +
                      " columns of A (" + detail::int8_dims(m, k) + ")");
  if (m > 0 && ldc < n)
    throw value_error("int8_gemm: ldc=" + std::to_string(ldc) + " is smaller than the N=" + std::to_string(n) +
                      " columns of C (" + detail::int8_dims(m, n) + ")");
  detail::int8_check_epilogue<Out>(n, epilogue);
  if (m == 0 || n == 0) return;

  // Per-column offsets and multipliers padded to whole panels, so vector stores read within them.
  const std::size_t padded = static_cast<std::size_t>(b.panels() * Isa::nr);
  std::int32_t* const offset = detail::int8_scratch<std::int32_t>(padded);
  float* const multiplier = detail::int8_scratch<float>(padded);
  const std::int32_t* colsum = b.column_sums();
  for (std::size_t j = 0; j < padded; ++j) {
    const auto correction = static_cast<std::uint32_t>(epilogue.a_zero_point) * static_cast<std::uint32_t>(colsum[j]);
    const std::int32_t bias = epilogue.bias != nullptr && j < static_cast<std::size_t>(n) ? epilogue.bias[j] : 0;
    offset[j] = static_cast<std::int32_t>(static_cast<std::uint32_t>(bias) - correction);
    multiplier[j] = epilogue.multiplier.empty()        ? 1.0f
                    : epilogue.multiplier.size() == 1  ? epilogue.multiplier[0]
                    : j < static_cast<std::size_t>(n)  ? epilogue.multiplier[j]
                                                       : 1.0f;
  }
  detail::int8_store_params params{offset, multiplier, 0.0f, 0.0f, epilogue.out_zero_point};
  if constexpr (!std::is_same_v<Out, float> && !std::is_same_v<Out, std::int32_t>) {
    params.lo = static_cast<float>(epilogue.qmin.value_or(std::numeric_limits<Out>::min()) - epilogue.out_zero_point);
    params.hi = static_cast<float>(epilogue.qmax.value_or(std::numeric_limits<Out>::max()) - epilogue.out_zero_point);
  }
  detail::int8_gemm_run(m, n, a, lda, b, params, c, ldc);
}

}  // namespace tracemod::kernels
