// AMX-INT8 micro-kernel of the int8 GEMM: a 32 x 32 block of C as four 16 x 16 int32 tiles,
// accumulated by tdpbusd from two A tiles (16 rows x 64 k, read in place) and two B tiles (16 k
// groups x 16 columns, straight out of the AVX-512 VNNI kernel's packed panels: the same layout, a
// panel's two halves 64 bytes apart), then stored to a buffer and finished by the VNNI epilogue.
// Blocks it cannot take (fewer rows, A packed, k not a multiple of 64) and every block when the
// kernel refuses the tile state (Linux before 5.16) go to the VNNI kernel: the sums are exact, so
// either path gives the same bits.
#pragma once

#include <tracemod/kernels/detail/int8_gemm_kernels.hpp>

#if defined(__AMX_INT8__) && defined(__AMX_TILE__) && defined(__AVX512VNNI__) && defined(__AVX512BW__) && \
    defined(__linux__)
#define TRACEMOD_INT8_AMX 1

#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstdint>

namespace tracemod::kernels::detail {

/// Whether this process may use the AMX tile data (asked of Linux once: ARCH_REQ_XCOMP_PERM for
/// XFEATURE_XTILEDATA, a process-wide permission).
[[nodiscard]] inline bool int8_amx_permitted() noexcept {
  static const bool permitted = [] {
    constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
  }();
  return permitted;
}

struct int8_isa_amx {
  static constexpr const char* name = "amx_int8";
  static constexpr std::int64_t mr = 32, nr = 32, kgroup = 4;
  using a_type = std::uint8_t;
  using b_type = std::int8_t;
  using fallback = int8_isa_avx512_vnni;
  static_assert(fallback::nr == nr && fallback::kgroup == kgroup, "AMX reads the VNNI kernel's packed panels");

  /// Tiles 0-3: C (rows 0-15 / 16-31 x columns 0-15 / 16-31); 4-5: A; 6-7: B. 16 rows of 64 bytes each.
  struct alignas(64) tile_config {
    std::uint8_t palette = 1, start_row = 0;
    std::array<std::uint8_t, 14> reserved{};
    std::array<std::uint16_t, 16> colsb{64, 64, 64, 64, 64, 64, 64, 64};
    std::array<std::uint8_t, 16> rows{16, 16, 16, 16, 16, 16, 16, 16};
  };

  /// Per thread, before its tiles (each parallel_for chunk): load the tile configuration.
  static void begin() noexcept {
    if (!int8_amx_permitted()) return;
    static const tile_config config{};
    _tile_loadconfig(&config);
  }
  /// Per thread, after its tiles: release the tile state.
  static void end() noexcept {
    if (int8_amx_permitted()) _tile_release();
  }

  template <int Rows, class Out>
  static void tile(std::int64_t groups, const a_type* a, std::int64_t a_rs, std::int64_t a_gs, const b_type* b,
                   const int8_store_params& p, std::int64_t j0, std::int64_t cols, Out* c, std::int64_t ldc) {
    if constexpr (Rows == mr) {
      if (a_gs == kgroup && groups % 16 == 0 && int8_amx_permitted()) {
        amx_block(groups, a, a_rs, b, p, j0, cols, c, ldc);
        return;
      }
    }
    for (std::int64_t r = 0; r < Rows; r += fallback::mr) {
      const std::int64_t rows = std::min<std::int64_t>(fallback::mr, Rows - r);
      int8_tiles<fallback, Out>[static_cast<std::size_t>(rows - 1)](groups, a + r * a_rs, a_rs, a_gs, b, p, j0, cols,
                                                                     c + r * ldc, ldc);
    }
  }

  template <class Out>
  static void amx_block(std::int64_t groups, const a_type* a, std::int64_t lda, const b_type* b,
                        const int8_store_params& p, std::int64_t j0, std::int64_t cols, Out* c, std::int64_t ldc) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (std::int64_t g = 0; g < groups; g += 16, a += 64, b += 16 * nr * kgroup) {
      // A's rows come from L2 (a run of row panels is larger than L1): fetch the next 64 k of each
      // while this step's products run.
      if (g + 16 < groups)
        for (std::int64_t r = 0; r < mr; ++r) _mm_prefetch(reinterpret_cast<const char*>(a + 64 + r * lda), _MM_HINT_T0);
      // Each load just before the first product that needs it, so loads overlap the products.
      _tile_loadd(4, a, lda);
      _tile_loadd(6, b, nr * kgroup);
      _tile_dpbusd(0, 4, 6);
      _tile_loadd(7, b + 64, nr * kgroup);
      _tile_dpbusd(1, 4, 7);
      _tile_loadd(5, a + 16 * lda, lda);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
    alignas(64) std::array<std::int32_t, mr * nr> sums;
    constexpr long stride = nr * sizeof(std::int32_t);
    _tile_stored(0, sums.data(), stride);
    _tile_stored(1, sums.data() + 16, stride);
    _tile_stored(2, sums.data() + 16 * nr, stride);
    _tile_stored(3, sums.data() + 16 * nr + 16, stride);
    const auto mask_of = [](std::int64_t n) {
      return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n <= 0 ? __mmask16{0} : static_cast<__mmask16>((1u << n) - 1u);
    };
    const __mmask16 m0 = mask_of(cols), m1 = mask_of(cols - 16);
    for (std::int64_t r = 0; r < mr; ++r) {
      const std::int32_t* row = sums.data() + r * nr;
      fallback::store16(_mm512_load_si512(row), j0, m0, p, c + r * ldc);
      if (cols > 16) fallback::store16(_mm512_load_si512(row + 16), j0 + 16, m1, p, c + r * ldc + 16);
    }
  }
};

}  // namespace tracemod::kernels::detail

#endif
