#include <tracemod/core/error.hpp>
#include <tracemod/kernels/int8_gemm.hpp>

#include <doctest/doctest.h>

#include "thread_counts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace tmod_test_kernels_int8_gemm {

namespace {

namespace kern = tracemod::kernels;

// Every micro-kernel this target compiles, each with its own packed layout.
template <class Isa>
struct isa_tag {
  using type = Isa;
};

template <class F>
void for_each_isa(const F& f) {
  f(isa_tag<kern::detail::int8_isa_scalar>{});
#if defined(__AVX2__)
  f(isa_tag<kern::detail::int8_isa_avx2>{});
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  f(isa_tag<kern::detail::int8_isa_avx512_vnni>{});
#endif
#if defined(TRACEMOD_INT8_AMX)
  f(isa_tag<kern::detail::int8_isa_amx>{});
#endif
}

// Random operands of an m x k by k x n product, with padded leading dimensions.
struct operands {
  std::int64_t m, n, k, lda, ldb;
  std::vector<std::uint8_t> a;
  std::vector<std::int8_t> b;
  std::vector<std::int32_t> bias;

  operands(std::int64_t m_, std::int64_t n_, std::int64_t k_, std::int64_t pad, unsigned seed)
      : m(m_), n(n_), k(k_), lda(k_ + pad), ldb(n_ + pad) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> byte(0, 255), bias_dist(-5000, 5000);
    a.resize(static_cast<std::size_t>(std::max<std::int64_t>(m * lda, 1)));
    b.resize(static_cast<std::size_t>(std::max<std::int64_t>(k * ldb, 1)));
    for (auto& x : a) x = static_cast<std::uint8_t>(byte(gen));
    for (auto& x : b) x = static_cast<std::int8_t>(byte(gen) - 128);
    bias.resize(static_cast<std::size_t>(n));
    for (auto& x : bias) x = bias_dist(gen);
  }

  // sum_p (a - za) * b + bias, in int64: the exact raw value.
  [[nodiscard]] std::int64_t raw(std::int64_t i, std::int64_t j, std::int32_t za, bool with_bias) const {
    std::int64_t s = with_bias ? bias[static_cast<std::size_t>(j)] : 0;
    for (std::int64_t p = 0; p < k; ++p)
      s += (std::int64_t{a[static_cast<std::size_t>(i * lda + p)]} - za) * b[static_cast<std::size_t>(p * ldb + j)];
    return s;
  }
};

// The documented rule, written independently: float multiply, round half to even, add the zero
// point, clamp (after rounding, where the kernel clamps before).
std::int32_t requantize(std::int64_t raw, float multiplier, std::int32_t zp, std::int32_t qmin, std::int32_t qmax) {
  const float y = static_cast<float>(raw) * multiplier;
  const long q = std::lrint(y) + zp;
  return static_cast<std::int32_t>(std::clamp<long>(q, qmin, qmax));
}

constexpr std::int64_t c_pad = 3;
constexpr int sentinel = 77;

template <class Isa, class Out>
std::vector<Out> run_gemm(const operands& o, const kern::int8_gemm_epilogue& e, bool trans_b = false) {
  std::vector<std::int8_t> stored = o.b;
  std::int64_t ldb = o.ldb;
  if (trans_b) {  // the same B stored as B^T, n x k
    ldb = o.k + 1;
    stored.assign(static_cast<std::size_t>(std::max<std::int64_t>(o.n * ldb, 1)), 0);
    for (std::int64_t p = 0; p < o.k; ++p)
      for (std::int64_t j = 0; j < o.n; ++j)
        stored[static_cast<std::size_t>(j * ldb + p)] = o.b[static_cast<std::size_t>(p * o.ldb + j)];
  }
  const kern::basic_int8_packed_b<Isa> packed(o.k, o.n, stored.data(), ldb, trans_b);
  std::vector<Out> c(static_cast<std::size_t>(o.m * (o.n + c_pad)), static_cast<Out>(sentinel));
  kern::int8_gemm(o.m, o.k, o.a.data(), o.lda, packed, e, c.data(), o.n + c_pad);
  return c;
}

template <class Out>
void check_padding_untouched(const operands& o, const std::vector<Out>& c) {
  for (std::int64_t i = 0; i < o.m; ++i)
    for (std::int64_t j = o.n; j < o.n + c_pad; ++j)
      REQUIRE(c[static_cast<std::size_t>(i * (o.n + c_pad) + j)] == static_cast<Out>(sentinel));
}

std::string describe(const char* isa, const operands& o) {
  return std::string(isa) + " M=" + std::to_string(o.m) + " N=" + std::to_string(o.n) + " K=" + std::to_string(o.k);
}

}  // namespace

TEST_CASE("int8_gemm: raw int32 sums match a triple loop for ragged shapes on every kernel") {
  for_each_isa([](auto tag) {
    using Isa = typename decltype(tag)::type;
    for (const std::int64_t m : {1, 2, 7, 8, 9, 17})
      for (const std::int64_t n : {1, 3, 16, 31, 33, 65})
        for (const std::int64_t k : {0, 1, 2, 3, 5, 8, 63, 130}) {
          const operands o(m, n, k, (m + n + k) % 3, static_cast<unsigned>(m * 10007 + n * 101 + k));
          const std::int32_t za = static_cast<std::int32_t>((m * 31 + k) % 256);
          const bool with_bias = (n + k) % 2 == 0;
          const std::vector<std::int32_t> c =
              run_gemm<Isa, std::int32_t>(o, {.a_zero_point = za, .bias = with_bias ? o.bias.data() : nullptr});
          CAPTURE(describe(Isa::name, o));
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j)
              REQUIRE(c[static_cast<std::size_t>(i * (n + c_pad) + j)] == o.raw(i, j, za, with_bias));
          check_padding_untouched(o, c);
        }
  });
}

TEST_CASE("int8_gemm: blocks of 32 rows and k a multiple of 64 (AMX tiles) and their ragged neighbours") {
  for_each_isa([](auto tag) {
    using Isa = typename decltype(tag)::type;
    for (const std::int64_t m : {32, 70})
      for (const std::int64_t n : {16, 50})
        for (const std::int64_t k : {64, 192, 196}) {
          const operands o(m, n, k, k == 64 ? 4 : 0, static_cast<unsigned>(m + n + k));
          CAPTURE(describe(Isa::name, o));
          std::vector<float> mult(static_cast<std::size_t>(n));
          for (std::int64_t j = 0; j < n; ++j) mult[static_cast<std::size_t>(j)] = 0.0001f * static_cast<float>(j + 3);
          const kern::int8_gemm_epilogue e{.a_zero_point = 77, .bias = o.bias.data(), .multiplier = mult,
                                           .out_zero_point = 128, .qmin = 128};
          const std::vector<std::uint8_t> c = run_gemm<Isa, std::uint8_t>(o, e);
          const std::vector<std::int32_t> raw = run_gemm<Isa, std::int32_t>(o, {.a_zero_point = 77});
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
              const auto at = static_cast<std::size_t>(i * (n + c_pad) + j);
              REQUIRE(raw[at] == o.raw(i, j, 77, false));
              REQUIRE(int{c[at]} == requantize(o.raw(i, j, 77, true), mult[static_cast<std::size_t>(j)], 128, 128, 255));
            }
          check_padding_untouched(o, c);
        }
  });
}

TEST_CASE("int8_gemm: requantized uint8 and int8, per tensor and per channel, with zero points and clamps") {
  for_each_isa([](auto tag) {
    using Isa = typename decltype(tag)::type;
    for (const std::int64_t m : {1, 5, 19})
      for (const std::int64_t n : {4, 37})
        for (const std::int64_t k : {7, 64, 99}) {
          const operands o(m, n, k, 1, static_cast<unsigned>(m * 7 + n * 3 + k));
          CAPTURE(describe(Isa::name, o));
          std::vector<float> per_channel(static_cast<std::size_t>(n));
          for (std::int64_t j = 0; j < n; ++j)
            per_channel[static_cast<std::size_t>(j)] = 1.0f / static_cast<float>(900 + 37 * j) / std::sqrt(float(k));
          const float per_tensor = 0.5f / 1000.0f / std::sqrt(float(k));
          const std::int32_t za = 119;
          for (const bool channel : {false, true}) {
            const std::span<const float> mult = channel ? std::span<const float>(per_channel)
                                                        : std::span<const float>(&per_tensor, 1);
            const auto m_of = [&](std::int64_t j) { return channel ? per_channel[static_cast<std::size_t>(j)] : per_tensor; };
            // uint8, zero point 100, full range; then relu (qmin = zero point) and relu6-like qmax.
            for (const auto& [qmin, qmax] : {std::pair{0, 255}, std::pair{100, 255}, std::pair{100, 160}}) {
              const kern::int8_gemm_epilogue e{.a_zero_point = za, .bias = o.bias.data(), .multiplier = mult,
                                               .out_zero_point = 100, .qmin = qmin, .qmax = qmax};
              const std::vector<std::uint8_t> c = run_gemm<Isa, std::uint8_t>(o, e);
              for (std::int64_t i = 0; i < m; ++i)
                for (std::int64_t j = 0; j < n; ++j)
                  REQUIRE(int{c[static_cast<std::size_t>(i * (n + c_pad) + j)]} ==
                          requantize(o.raw(i, j, za, true), m_of(j), 100, qmin, qmax));
              check_padding_untouched(o, c);
            }
            const kern::int8_gemm_epilogue e{.a_zero_point = za, .multiplier = mult, .out_zero_point = -3};
            const std::vector<std::int8_t> c = run_gemm<Isa, std::int8_t>(o, e, /*trans_b=*/true);
            for (std::int64_t i = 0; i < m; ++i)
              for (std::int64_t j = 0; j < n; ++j)
                REQUIRE(int{c[static_cast<std::size_t>(i * (n + c_pad) + j)]} ==
                        requantize(o.raw(i, j, za, false), m_of(j), -3, -128, 127));
            check_padding_untouched(o, c);
          }
        }
  });
}

TEST_CASE("int8_gemm: float output is float(raw) times the multiplier") {
  for_each_isa([](auto tag) {
    using Isa = typename decltype(tag)::type;
    const operands o(13, 35, 21, 2, 5);
    std::vector<float> mult(35);
    for (std::size_t j = 0; j < mult.size(); ++j) mult[j] = 0.001f * static_cast<float>(j + 1);
    const std::vector<float> c =
        run_gemm<Isa, float>(o, {.a_zero_point = 3, .bias = o.bias.data(), .multiplier = mult});
    CAPTURE(Isa::name);
    for (std::int64_t i = 0; i < o.m; ++i)
      for (std::int64_t j = 0; j < o.n; ++j)
        REQUIRE(c[static_cast<std::size_t>(i * (o.n + c_pad) + j)] ==
                static_cast<float>(o.raw(i, j, 3, true)) * mult[static_cast<std::size_t>(j)]);
  });
}

TEST_CASE("int8_gemm: extreme operands do not saturate (255 x -128 and 255 x 127 over long k)") {
  for_each_isa([](auto tag) {
    using Isa = typename decltype(tag)::type;
    for (const int weight : {-128, 127}) {
      operands o(3, 17, 4099, 0, 1);
      std::fill(o.a.begin(), o.a.end(), std::uint8_t{255});
      std::fill(o.b.begin(), o.b.end(), static_cast<std::int8_t>(weight));
      const std::vector<std::int32_t> c = run_gemm<Isa, std::int32_t>(o, {});
      CAPTURE(Isa::name);
      for (std::int64_t i = 0; i < o.m; ++i)
        for (std::int64_t j = 0; j < o.n; ++j)
          REQUIRE(c[static_cast<std::size_t>(i * (o.n + c_pad) + j)] == std::int64_t{255} * weight * 4099);
    }
  });
}

TEST_CASE("int8_gemm: the same bits at 1, 2, 3 and 4 threads") {
  // k = 77: A packed per row panel; k = 128: rows read in place (on AMX, 32-row tiles and a tail).
  for (const std::int64_t k : {77, 128}) {
    const operands o(100, 70, k, 1, 9);
    std::vector<float> mult(70, 0.0003f);
    for (std::size_t j = 0; j < mult.size(); ++j) mult[j] *= static_cast<float>(1 + j % 5);
    const kern::int8_packed_b packed(o.k, o.n, o.b.data(), o.ldb);
    thread_counts::check_bit_identical("int8_gemm u8", [&] {
      std::vector<std::uint8_t> c(static_cast<std::size_t>(o.m * o.n));
      kern::int8_gemm(o.m, o.k, o.a.data(), o.lda, packed,
                      {.a_zero_point = 128, .bias = o.bias.data(), .multiplier = mult, .out_zero_point = 5, .qmin = 5},
                      c.data(), o.n);
      return std::vector<float>(c.begin(), c.end());
    });
    thread_counts::check_bit_identical("int8_gemm s32", [&] {
      std::vector<std::int32_t> c(static_cast<std::size_t>(o.m * o.n));
      kern::int8_gemm(o.m, o.k, o.a.data(), o.lda, packed, {.a_zero_point = 7}, c.data(), o.n);
      std::vector<float> bits(c.size());
      std::memcpy(bits.data(), c.data(), c.size() * sizeof(std::int32_t));
      return bits;
    });
  }
}

TEST_CASE("int8_gemm: one row of A split by columns, the same bits at 1 to 4 threads") {
  const operands o(1, 300, 64, 0, 4);
  const kern::int8_packed_b packed(o.k, o.n, o.b.data(), o.ldb);
  thread_counts::check_bit_identical("int8_gemm m=1", [&] {
    std::vector<std::int32_t> c(static_cast<std::size_t>(o.n));
    kern::int8_gemm(o.m, o.k, o.a.data(), o.lda, packed, {.a_zero_point = 9, .bias = o.bias.data()}, c.data(), o.n);
    for (std::int64_t j = 0; j < o.n; ++j) REQUIRE(c[static_cast<std::size_t>(j)] == o.raw(0, j, 9, true));
    std::vector<float> bits(c.size());
    std::memcpy(bits.data(), c.data(), c.size() * sizeof(std::int32_t));
    return bits;
  });
}

TEST_CASE("int8_gemm: bad input throws naming the kernel and the shapes, C untouched") {
  const operands o(4, 6, 5, 0, 3);
  const kern::int8_packed_b packed(o.k, o.n, o.b.data(), o.ldb);
  std::vector<std::uint8_t> c(24, 9);
  const float one = 1.0f, zero = 0.0f, nan = std::numeric_limits<float>::quiet_NaN();
  const auto call = [&](std::int64_t k, const kern::int8_gemm_epilogue& e) {
    kern::int8_gemm(o.m, k, o.a.data(), std::max<std::int64_t>(k, 1), packed, e, c.data(), o.n);
  };
  const auto message = [](auto&& f) {
    try {
      f();
    } catch (const tracemod::error& e) {
      return std::string(e.what());
    }
    return std::string("no throw");
  };
  CHECK_THROWS_AS(call(7, {.multiplier = {&one, 1}}), tracemod::shape_error);
  const std::string mismatch = message([&] { call(7, {.multiplier = {&one, 1}}); });
  CHECK(mismatch.find("int8_gemm") != std::string::npos);
  CHECK(mismatch.find("4x7") != std::string::npos);
  CHECK(mismatch.find("5x6") != std::string::npos);
  CHECK_THROWS_AS(call(5, {.multiplier = {&zero, 1}}), tracemod::value_error);
  CHECK_THROWS_AS(call(5, {.multiplier = {&nan, 1}}), tracemod::value_error);
  CHECK(message([&] { call(5, {.multiplier = {&zero, 1}}); }).find("multiplier[0]") != std::string::npos);
  CHECK_THROWS_AS(call(5, {}), tracemod::value_error);  // uint8 output needs a multiplier
  const std::vector<float> three(3, 1.0f);
  CHECK_THROWS_AS(call(5, {.multiplier = three}), tracemod::value_error);
  CHECK_THROWS_AS(call(5, {.a_zero_point = 256, .multiplier = {&one, 1}}), tracemod::value_error);
  CHECK_THROWS_AS(call(5, {.a_zero_point = -1, .multiplier = {&one, 1}}), tracemod::value_error);
  CHECK_THROWS_AS(call(5, {.multiplier = {&one, 1}, .out_zero_point = 300}), tracemod::value_error);
  CHECK(message([&] { call(5, {.multiplier = {&one, 1}, .out_zero_point = 300}); }).find("300") != std::string::npos);
  CHECK_THROWS_AS(call(5, {.multiplier = {&one, 1}, .qmin = 10, .qmax = 5}), tracemod::value_error);
  CHECK_THROWS_AS(call(5, {.multiplier = {&one, 1}, .qmax = 256}), tracemod::value_error);
  CHECK(std::all_of(c.begin(), c.end(), [](std::uint8_t x) { return x == 9; }));

  std::vector<std::int32_t> raw(24);
  CHECK_THROWS_AS(kern::int8_gemm(o.m, o.k, o.a.data(), o.k, packed, {.multiplier = {&one, 1}}, raw.data(), o.n),
                  tracemod::value_error);
  std::vector<std::int8_t> s8(24);
  CHECK_THROWS_AS(kern::int8_gemm(o.m, o.k, o.a.data(), o.k, packed, {.multiplier = {&one, 1}, .out_zero_point = 128},
                                  s8.data(), o.n),
                  tracemod::value_error);
  CHECK_THROWS_AS(kern::int8_gemm(o.m, o.k, o.a.data(), o.k - 1, packed, {.multiplier = {&one, 1}}, c.data(), o.n),
                  tracemod::value_error);
  CHECK_THROWS_AS(kern::int8_gemm(o.m, o.k, o.a.data(), o.k, packed, {.multiplier = {&one, 1}}, c.data(), o.n - 1),
                  tracemod::value_error);
  CHECK_THROWS_AS(kern::int8_packed_b(5, 6, o.b.data(), 5), tracemod::value_error);
  CHECK_THROWS_AS(kern::int8_packed_b(-1, 6, o.b.data(), 6), tracemod::value_error);
}

}  // namespace tmod_test_kernels_int8_gemm
