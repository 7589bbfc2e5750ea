// The int8 GEMM (kernels/int8_gemm.hpp): throughput at 1 and 2 threads against the int8 peak of the
// cores used, measured in the same run the way machine_limits.hpp measures the FMA peak (independent
// chains of the vector multiply-add instruction, vpdpbusd; and of AMX's tdpbusd where the target has
// it, the VNNI kernel then benchmarked beside the AMX one); and the cost of the requantizing epilogue
// at a convolution's shape (ResNet's 3x3 64-channel layer on a 56x56 plane as im2col: m = 56 * 56,
// n = 64, k = 576), raw int32 output against requantized uint8, alternated in one benchmark.
#include "machine_limits.hpp"
#include "smoke.hpp"
#include "threads.hpp"

#include <tracemod/kernels/int8_gemm.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

namespace tmod_bench_int8_gemm {

namespace {

namespace kern = tracemod::kernels;

/// Independent accumulator chains of the peak probe: latency x ports of vpdpbusd (5 x 2) and more.
constexpr std::size_t peak_chains = 12;

/// Multiply-add throughput of one core in int8 operations per second (2 per multiply-add), through
/// the instruction of the micro-kernel this target compiles: vpdpbusd (64 u8 x s8 products per
/// 512-bit instruction) or vpmaddwd + vpaddd (16 products per 256-bit pair); 0 for the scalar kernel.
template <std::size_t... J>
double int8_peak_gops(std::index_sequence<J...>) {
  [[maybe_unused]] constexpr std::int64_t iterations = std::int64_t{1} << 22;
  double best = 0;
  for (int rep = 0; rep < 7; ++rep) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
    const __m512i a = _mm512_set1_epi32(0x01020304), b = _mm512_set1_epi32(0x01ff01ff);
    __m512i acc[] = {_mm512_set1_epi32(static_cast<int>(J))...};
    const double start = tracemod::bench::detail::cpu_seconds();
    for (std::int64_t i = 0; i < iterations; ++i) ((acc[J] = kern::detail::int8_isa_avx512_vnni::dpbusd(acc[J], a, b)), ...);
    const double seconds = tracemod::bench::detail::cpu_seconds() - start;
    benchmark::DoNotOptimize(acc);
    best = std::max(best, 2.0 * 64 * sizeof...(J) * static_cast<double>(iterations) / seconds * 1e-9);
#elif defined(__AVX2__)
    const __m256i a = _mm256_set1_epi32(0x00030004), b = _mm256_set1_epi32(0x0001ffff);
    __m256i acc[] = {_mm256_set1_epi32(static_cast<int>(J))...};
    const double start = tracemod::bench::detail::cpu_seconds();
    for (std::int64_t i = 0; i < iterations; ++i) ((acc[J] = _mm256_add_epi32(acc[J], _mm256_madd_epi16(a, b))), ...);
    const double seconds = tracemod::bench::detail::cpu_seconds() - start;
    benchmark::DoNotOptimize(acc);
    best = std::max(best, 2.0 * 16 * sizeof...(J) * static_cast<double>(iterations) / seconds * 1e-9);
#endif
  }
  return best;
}

/// Measured on first use, once per process.
double int8_peak() {
  static const double peak = int8_peak_gops(std::make_index_sequence<peak_chains>{});
  return peak;
}

/// AMX's tdpbusd throughput in int8 operations per second (16 x 16 x 64 multiply-adds per
/// instruction), four independent accumulator tiles; 0 without AMX.
double amx_peak() {
#if defined(TRACEMOD_INT8_AMX)
  static const double peak = [] {
    using amx = kern::detail::int8_isa_amx;
    if (!kern::detail::int8_amx_permitted()) return 0.0;
    alignas(64) static std::array<std::uint8_t, 16 * 64> ones;
    ones.fill(1);
    constexpr std::int64_t iterations = std::int64_t{1} << 16;
    double best = 0;
    amx::begin();
    _tile_loadd(4, ones.data(), 64);
    _tile_loadd(6, ones.data(), 64);
    for (int rep = 0; rep < 7; ++rep) {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      const double start = tracemod::bench::detail::cpu_seconds();
      for (std::int64_t i = 0; i < iterations; ++i) {
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 6);
        _tile_dpbusd(2, 4, 6);
        _tile_dpbusd(3, 4, 6);
      }
      const double seconds = tracemod::bench::detail::cpu_seconds() - start;
      best = std::max(best, 2.0 * 16 * 16 * 64 * 4 * static_cast<double>(iterations) / seconds * 1e-9);
    }
    _tile_stored(0, ones.data(), 64);
    benchmark::DoNotOptimize(ones.data());
    amx::end();
    return best;
  }();
  return peak;
#else
  return 0.0;
#endif
}

void BM_int8_peak(benchmark::State& state) {
  const double peak = int8_peak(), amx = amx_peak();
  for (auto _ : state) benchmark::DoNotOptimize(peak);
  state.counters["int8_peak_gops"] = peak;
  if (amx > 0) state.counters["amx_peak_gops"] = amx;
  state.SetLabel(kern::detail::int8_isa::name);
}

/// A (m x k uint8), B (k x n int8, packed for Isa), per-channel multipliers and an int32 bias.
template <class Isa = kern::detail::int8_isa>
struct int8_operands {
  std::int64_t m, n, k;
  std::vector<std::uint8_t> a;
  std::vector<std::int8_t> b;
  std::vector<float> multiplier;
  std::vector<std::int32_t> bias;
  kern::basic_int8_packed_b<Isa> packed;

  static std::vector<std::int8_t> weights(std::int64_t k, std::int64_t n) {
    std::mt19937 gen(2);
    std::uniform_int_distribution<int> dist(-128, 127);
    std::vector<std::int8_t> w(static_cast<std::size_t>(k * n));
    for (auto& x : w) x = static_cast<std::int8_t>(dist(gen));
    return w;
  }

  int8_operands(std::int64_t m_, std::int64_t n_, std::int64_t k_)
      : m(m_), n(n_), k(k_), a(static_cast<std::size_t>(m_ * k_)), b(weights(k_, n_)),
        multiplier(static_cast<std::size_t>(n_), 1.0f / 4096.0f), bias(static_cast<std::size_t>(n_), 100),
        packed(k_, n_, b.data(), n_) {
    std::mt19937 gen(1);
    std::uniform_int_distribution<int> dist(0, 255);
    for (auto& x : a) x = static_cast<std::uint8_t>(dist(gen));
  }

  template <class Out>
  void run(const kern::int8_gemm_epilogue& e, std::vector<Out>& c) const {
    kern::int8_gemm(m, k, a.data(), k, packed, e, c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
};

/// GOP/s (2 operations per multiply-add), of_int8_peak (the fraction of int8_peak() x threads) and,
/// for the AMX kernel, of_amx_peak.
template <class Isa>
void report_ops(benchmark::State& state, double ops, std::int64_t cores) {
  using benchmark::Counter;
  state.counters["GOP/s"] = Counter(ops * 1e-9, Counter::kIsIterationInvariantRate);
  const auto fraction = [&](double peak) {
    return Counter(ops / (peak * 1e9 * static_cast<double>(cores)), Counter::kIsIterationInvariantRate);
  };
  if (int8_peak() > 0) state.counters["of_int8_peak"] = fraction(int8_peak());
#if defined(TRACEMOD_INT8_AMX)
  if (std::is_same_v<Isa, kern::detail::int8_isa_amx> && amx_peak() > 0) state.counters["of_amx_peak"] = fraction(amx_peak());
#endif
}

template <class Isa>
void run_int8_gemm(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k) {
  const tracemod::bench::scoped_threads threads(state, 0);
  const int8_operands<Isa> g(m, n, k);
  std::vector<std::int32_t> c(static_cast<std::size_t>(m * n));
  for (auto _ : state) g.run(kern::int8_gemm_epilogue{.a_zero_point = 128}, c);
  report_ops<Isa>(state, 2.0 * static_cast<double>(m * n * k), state.range(0));
  state.SetLabel(Isa::name);
}

/// The kernel the target selects.
void BM_int8_gemm(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k) {
  run_int8_gemm<kern::detail::int8_isa>(state, m, n, k);
}

#if defined(TRACEMOD_INT8_AMX)
/// The AVX-512 VNNI kernel on a target that selects AMX, against the vpdpbusd peak.
void BM_int8_gemm_vnni(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k) {
  run_int8_gemm<kern::detail::int8_isa_avx512_vnni>(state, m, n, k);
}
#endif

/// Raw int32 output against requantized uint8 (per-channel multipliers, bias, zero point, relu),
/// blocks of calls alternated (tracemod::bench::run_alternated), one thread. epilogue_share =
/// (ms_u8 - ms_s32) / ms_u8: the part of the layer's time the requantization adds over storing the
/// raw sums (negative when writing a quarter of the bytes saves more than it costs).
template <class Isa>
void run_int8_gemm_epilogue(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k) {
  const int before = tracemod::get_num_threads();
  tracemod::set_num_threads(1);
  const int8_operands<Isa> g(m, n, k);
  std::vector<std::int32_t> raw(static_cast<std::size_t>(m * n));
  std::vector<std::uint8_t> requantized(static_cast<std::size_t>(m * n));
  const kern::int8_gemm_epilogue requantize{
      .a_zero_point = 128, .bias = g.bias.data(), .multiplier = g.multiplier, .out_zero_point = 10, .qmin = 10};
  const tracemod::bench::alternated_times t = tracemod::bench::run_alternated(
      state, 8, [&] { g.run(kern::int8_gemm_epilogue{.a_zero_point = 128, .bias = g.bias.data()}, raw); },
      [&] { g.run(requantize, requantized); });
  tracemod::set_num_threads(before);
  state.counters["ms_s32"] = t.median_a;
  state.counters["ms_u8"] = t.median_b;
  state.counters["epilogue_share"] = (t.median_b - t.median_a) / t.median_b;
  state.counters["GOP/s_u8"] = 2.0 * static_cast<double>(m * n * k) / (t.median_b * 1e-3) * 1e-9;
  state.SetLabel(Isa::name);
}

void BM_int8_gemm_epilogue(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k) {
  run_int8_gemm_epilogue<kern::detail::int8_isa>(state, m, n, k);
}

#if defined(TRACEMOD_INT8_AMX)
void BM_int8_gemm_epilogue_vnni(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k) {
  run_int8_gemm_epilogue<kern::detail::int8_isa_avx512_vnni>(state, m, n, k);
}
#endif

}  // namespace

BENCHMARK(BM_int8_peak)->Iterations(1);
BENCHMARK_CAPTURE(BM_int8_gemm, square_512, 512, 512, 512)
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_int8_gemm, conv_3136x64x576, 56 * 56, 64, 576)
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
// Batch-1 nn.Linear: one row against 1000 x 512 weights, bound by reading them.
BENCHMARK_CAPTURE(BM_int8_gemm, linear_1x1000x512, 1, 1000, 512)
    ->Unit(benchmark::kMicrosecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.2));
#if defined(TRACEMOD_INT8_AMX)
BENCHMARK_CAPTURE(BM_int8_gemm_vnni, square_512, 512, 512, 512)
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
BENCHMARK_CAPTURE(BM_int8_gemm_vnni, conv_3136x64x576, 56 * 56, 64, 576)
    ->Unit(benchmark::kMillisecond)->Apply(tracemod::bench::over_threads)->MinTime(tracemod::bench::min_time(0.3));
#endif
BENCHMARK_CAPTURE(BM_int8_gemm_epilogue, conv_3136x64x576, 56 * 56, 64, 576)
    ->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(tracemod::bench::min_time(1.0));
#if defined(TRACEMOD_INT8_AMX)
BENCHMARK_CAPTURE(BM_int8_gemm_epilogue_vnni, conv_3136x64x576, 56 * 56, 64, 576)
    ->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(tracemod::bench::min_time(1.0));
#endif

}  // namespace tmod_bench_int8_gemm
