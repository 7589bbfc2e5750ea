#include <tracemod/core/error.hpp>
#include <tracemod/kernels/gemm.hpp>

#include <doctest/doctest.h>

#include "thread_counts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace tmod_test_kernels_gemm {

namespace {

namespace kern = tracemod::kernels;

constexpr float sentinel = 12345.0f;

// A row-major matrix stored one float past a vector's start (so never SIMD-aligned), with row stride
// ld >= cols, and exactly as many floats as the last row needs: sanitizers catch any over-read.
struct stored_matrix {
  std::int64_t rows, cols, ld;
  std::vector<float> storage;

  stored_matrix(std::int64_t r, std::int64_t c, std::int64_t pad, std::mt19937& gen)
      : rows(r), cols(c), ld(c + pad),
        storage(static_cast<std::size_t>(1 + (r > 0 ? (r - 1) * (c + pad) + c : 0)), sentinel) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) at(i, j) = dist(gen);
  }
  float* data() { return storage.data() + 1; }
  float& at(std::int64_t i, std::int64_t j) { return data()[i * ld + j]; }
};

struct gemm_case {
  bool trans_a, trans_b;
  std::int64_t m, n, k;
  float alpha = 1.0f, beta = 0.0f;
  std::int64_t pad = 0;  // extra elements per row of A, B and C
};

std::string describe(const gemm_case& t) {
  return "trans_a=" + std::to_string(t.trans_a) + " trans_b=" + std::to_string(t.trans_b) +
         " M=" + std::to_string(t.m) + " N=" + std::to_string(t.n) + " K=" + std::to_string(t.k) +
         " alpha=" + std::to_string(t.alpha) + " beta=" + std::to_string(t.beta) + " pad=" + std::to_string(t.pad);
}

// Runs kernel `f` (gemm or gemm_reference) and compares with a double-precision triple loop; the
// tolerance scales with sum |alpha a b| + |beta c|, the magnitude float rounding is relative to.
template <class Gemm>
void check_gemm(const gemm_case& t, Gemm f) {
  CAPTURE(describe(t));
  std::mt19937 gen(static_cast<unsigned>(t.m * 1000003 + t.n * 1009 + t.k * 7 + t.trans_a * 2 + t.trans_b));
  stored_matrix a(t.trans_a ? t.k : t.m, t.trans_a ? t.m : t.k, t.pad, gen);
  stored_matrix b(t.trans_b ? t.n : t.k, t.trans_b ? t.k : t.n, t.pad, gen);
  stored_matrix c(t.m, t.n, t.pad, gen);
  const std::vector<float> c_before = c.storage;

  f(t.trans_a, t.trans_b, t.m, t.n, t.k, t.alpha, a.data(), a.ld, b.data(), b.ld, t.beta, c.data(), c.ld);

  for (std::int64_t i = 0; i < t.m; ++i) {
    for (std::int64_t j = 0; j < t.n; ++j) {
      double sum = 0, magnitude = 0;
      for (std::int64_t p = 0; p < t.k; ++p) {
        const double x = t.trans_a ? a.at(p, i) : a.at(i, p);
        const double y = t.trans_b ? b.at(j, p) : b.at(p, j);
        sum += x * y;
        magnitude += std::abs(x * y);
      }
      const double old = c_before[static_cast<std::size_t>(1 + i * c.ld + j)];
      const double expected = t.alpha * sum + (t.beta == 0.0f ? 0.0 : t.beta * old);
      const double tolerance = 1e-5 * (std::abs(t.alpha) * magnitude + std::abs(t.beta * old)) + 1e-30;
      if (std::abs(c.at(i, j) - expected) > tolerance) {
        CAPTURE(i);
        CAPTURE(j);
        CHECK(c.at(i, j) == doctest::Approx(expected));
        return;
      }
    }
  }
  // Nothing outside the M x N window of C is written: not the row padding, not the guard float.
  for (std::size_t q = 0; q < c.storage.size(); ++q) {
    const auto off = static_cast<std::int64_t>(q) - 1;
    if (off >= 0 && off % c.ld < t.n) continue;
    REQUIRE(c.storage[q] == sentinel);
  }
}

void fast(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  kern::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void reference(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
               std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  kern::gemm_reference(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

constexpr bool transposes[2] = {false, true};

}  // namespace

TEST_CASE("gemm_reference: hand-computed products") {
  // [1 2; 3 4] * [5 6; 7 8] = [19 22; 43 50]
  const float a[] = {1, 2, 3, 4};
  const float b[] = {5, 6, 7, 8};
  float c[] = {1, 1, 1, 1};
  kern::gemm_reference(false, false, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  CHECK(c[0] == 19);
  CHECK(c[1] == 22);
  CHECK(c[2] == 43);
  CHECK(c[3] == 50);
  // 2 * A^T B^T + 3 * C: A^T = [1 3; 2 4], B^T = [5 7; 6 8], A^T B^T = [23 31; 34 46]
  kern::gemm_reference(true, true, 2, 2, 2, 2.0f, a, 2, b, 2, 3.0f, c, 2);
  CHECK(c[0] == 2 * 23 + 3 * 19);
  CHECK(c[1] == 2 * 31 + 3 * 22);
  CHECK(c[2] == 2 * 34 + 3 * 43);
  CHECK(c[3] == 2 * 46 + 3 * 50);
}

TEST_CASE("gemm_reference agrees with a double-precision loop") {
  for (bool ta : transposes)
    for (bool tb : transposes) check_gemm({ta, tb, 7, 5, 9, 0.5f, -2.0f, 3}, reference);
}

TEST_CASE("gemm: odd sizes, every transpose combination") {
  const std::int64_t sizes[] = {1, 7, 17, 33, 100};
  for (bool ta : transposes)
    for (bool tb : transposes)
      for (std::int64_t m : sizes)
        for (std::int64_t n : sizes)
          for (std::int64_t k : {std::int64_t{1}, std::int64_t{17}, std::int64_t{100}}) check_gemm({ta, tb, m, n, k}, fast);
}

TEST_CASE("gemm: sizes crossing the register and cache blocking boundaries") {
  using kern::detail::gemm_mr;
  using kern::detail::gemm_nr;
  const std::int64_t gemm_kc = kern::detail::gemm_blocking().kc;  // this machine's blocks
  const std::int64_t gemm_nc = kern::detail::gemm_blocking().nc;
  const gemm_case cases[] = {
      {false, false, gemm_mr - 1, gemm_nr - 1, 3},     {false, false, gemm_mr, gemm_nr, 3},
      {false, false, gemm_mr + 1, gemm_nr + 1, 3},     {false, false, 2 * gemm_mr + 1, 2 * gemm_nr + 1, 5},
      {false, false, 9, 20, gemm_kc - 1},              {false, false, 9, 20, gemm_kc},
      {false, false, 9, 20, gemm_kc + 1},              {false, false, 9, 20, 2 * gemm_kc + 3},
      {false, false, 5, gemm_nc - 1, 4},               {false, false, 5, gemm_nc, 4},
      {false, false, 5, gemm_nc + 1, 4},               {false, false, 3, 2 * gemm_nc + gemm_nr + 3, 6},
      {false, false, 2 * gemm_nc + 1, 3, 6},           {false, false, 19, gemm_nc + 7, gemm_kc + 5},
  };
  for (const auto& c : cases)
    for (bool ta : transposes)
      for (bool tb : transposes) check_gemm({ta, tb, c.m, c.n, c.k, 1.5f, 0.0f, 0}, fast);
}

TEST_CASE("gemm: alpha, beta and leading dimensions wider than the rows") {
  for (bool ta : transposes) {
    for (bool tb : transposes) {
      check_gemm({ta, tb, 13, 45, 21, 0.5f, 1.0f, 0}, fast);
      check_gemm({ta, tb, 13, 45, 21, -2.0f, 0.25f, 5}, fast);
      check_gemm({ta, tb, 70, 9, 40, 1.0f, -1.0f, 17}, fast);        // computed as C^T when trans_a
      check_gemm({ta, tb, 9, 70, 600, 1.0f, 2.0f, 1}, fast);         // two k blocks: beta applied once
      check_gemm({ta, tb, 64, 200, 100, 1.0f, 0.5f, 3}, fast);       // computed as C^T when trans_b
      check_gemm({ta, tb, 1, 150, 40, 0.5f, 2.0f, 3}, fast);         // matrix-vector products
      check_gemm({ta, tb, 150, 1, 40, -1.0f, 0.5f, 2}, fast);
    }
  }
  check_gemm({false, true, 64, 1000, 512, 1.0f, 0.0f, 0}, fast);     // nn.Linear: batch x weights^T
}

TEST_CASE("gemm: beta == 0 ignores NaN in C, alpha == 0 ignores A and B") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (bool tb : transposes) {
    std::vector<float> a(9 * 11, 1.0f), b(11 * 40, 2.0f), c(9 * 40, nan);
    kern::gemm(false, tb, 9, 40, 11, 1.0f, a.data(), 11, b.data(), tb ? 11 : 40, 0.0f, c.data(), 40);
    for (float x : c) REQUIRE(x == 22.0f);
    std::fill(a.begin(), a.end(), nan);
    kern::gemm(false, tb, 9, 40, 11, 0.0f, a.data(), 11, b.data(), tb ? 11 : 40, 0.5f, c.data(), 40);
    for (float x : c) REQUIRE(x == 11.0f);
  }
}

TEST_CASE("gemm: K == 0 scales C by beta; empty M or N writes nothing") {
  std::vector<float> c(3 * 4, 2.0f);
  kern::gemm(false, false, 3, 4, 0, 1.0f, nullptr, 0, nullptr, 4, 3.0f, c.data(), 4);
  for (float x : c) CHECK(x == 6.0f);
  kern::gemm(true, true, 3, 4, 0, 1.0f, nullptr, 3, nullptr, 0, 0.0f, c.data(), 4);
  for (float x : c) CHECK(x == 0.0f);
  std::fill(c.begin(), c.end(), 5.0f);
  kern::gemm(false, false, 0, 4, 3, 1.0f, nullptr, 3, nullptr, 4, 0.0f, c.data(), 4);
  kern::gemm(false, false, 3, 0, 3, 1.0f, nullptr, 3, nullptr, 0, 0.0f, c.data(), 0);
  for (float x : c) CHECK(x == 5.0f);
}

TEST_CASE("gemm: invalid sizes and leading dimensions throw value_error") {
  std::vector<float> a(64), b(64), c(64);
  CHECK_THROWS_AS(kern::gemm(false, false, -1, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2),
                  tracemod::value_error);
  CHECK_THROWS_WITH_AS(kern::gemm(false, false, 2, 2, 3, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2),
                       doctest::Contains("lda=2"), tracemod::value_error);
  CHECK_THROWS_WITH_AS(kern::gemm(false, true, 2, 4, 3, 1.0f, a.data(), 3, b.data(), 2, 0.0f, c.data(), 4),
                       doctest::Contains("ldb=2"), tracemod::value_error);
  CHECK_THROWS_WITH_AS(kern::gemm(true, false, 2, 4, 3, 1.0f, a.data(), 2, b.data(), 4, 0.0f, c.data(), 3),
                       doctest::Contains("ldc=3"), tracemod::value_error);
  CHECK_THROWS_AS(kern::gemm_reference(false, false, 2, 2, 3, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2),
                  tracemod::value_error);
}

TEST_CASE("gemm_blocked: op(B) packed once (gemm_packed_b) gives the bits of packing per block") {
  namespace kd = tracemod::kernels::detail;
  // k spans two k blocks of this machine's blocking with a short last one; n leaves a partial last
  // NR panel and, with op(A) read in place, dot-product columns; m a partial row panel. Each case
  // with a bias, an accumulated C, a residual and relu6, so every part of the epilogue is exercised.
  const std::int64_t k = kd::gemm_blocking().kc + 37;
  struct shape {
    std::int64_t m, n;
    bool a_in_place;
  };
  for (const shape sh : {shape{kd::gemm_mr + 3, 2 * kd::gemm_nr + 1, true}, shape{kd::gemm_mr + 3, 2 * kd::gemm_nr + 1, false},
                         shape{3 * kd::gemm_mr, kd::gemm_blocking().nc + 5, false}, shape{2, 5, true},
                         // enough panels for the column split at 2 and 3 threads (the tile split at 4)
                         shape{5, 16 * kd::gemm_nr + 3, true}}) {
    CAPTURE(sh.m);
    CAPTURE(sh.n);
    CAPTURE(sh.a_in_place);
    std::mt19937 gen(static_cast<unsigned>(sh.m * 7 + sh.n));
    stored_matrix a(sh.a_in_place ? sh.m : k, sh.a_in_place ? k : sh.m, 0, gen);  // op(A) = a or a^T
    stored_matrix b(sh.n, k, 3, gen);                                             // op(B) = b^T: a transposing pack
    stored_matrix c0(sh.m, sh.n, 0, gen), residual(sh.m, sh.n, 0, gen), bias(1, sh.m, 0, gen);
    const kd::strided_matrix op_a = sh.a_in_place ? kd::strided_matrix{a.data(), k, 1} : kd::strided_matrix{a.data(), 1, sh.m};
    const kd::strided_matrix op_b{b.data(), 1, b.ld};
    kern::aligned_floats packed(static_cast<std::size_t>(kd::gemm_packed_b_size(k, sh.n)), sentinel);
    kd::gemm_pack_b(op_b, 0, k, 0, sh.n, packed.data());
    const auto run = [&](bool prepacked) {
      std::vector<float> c(c0.storage.begin() + 1, c0.storage.end());
      const kd::strided_output out{c.data(), sh.n, 1};
      if (prepacked)
        kd::gemm_blocked(sh.m, sh.n, k, 0.5f, op_a, kd::gemm_packed_b{packed.data()}, 2.0f, bias.data(), out,
                         residual.data(), kern::activation::relu6);
      else
        kd::gemm_blocked(
            sh.m, sh.n, k, 0.5f, op_a,
            [&](float* dst, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t nc) {
              kd::gemm_pack_b(op_b, k0, kc, j0, nc, dst);
            },
            2.0f, bias.data(), out, residual.data(), kern::activation::relu6);
      return c;
    };
    const std::vector<float> per_block = run(false), once = run(true);
    CHECK(thread_counts::same_bits(once, per_block));
    thread_counts::check_bit_identical("gemm_blocked, op(B) packed once", [&] { return run(true); });
    // Against the reference: relu6(0.5 A B + bias + 2 C + R).
    std::vector<float> expected(c0.storage.begin() + 1, c0.storage.end());
    kern::gemm_reference(!sh.a_in_place, true, sh.m, sh.n, k, 0.5f, a.data(), a.ld, b.data(), b.ld, 2.0f,
                         expected.data(), sh.n);
    for (std::int64_t i = 0; i < sh.m; ++i)
      for (std::int64_t j = 0; j < sh.n; ++j) {
        float& e = expected[static_cast<std::size_t>(i * sh.n + j)];
        e = std::clamp(e + bias.data()[i] + residual.at(i, j), 0.0f, 6.0f);
      }
    for (std::size_t i = 0; i < expected.size(); ++i)
      if (std::abs(once[i] - expected[i]) > 1e-4f * static_cast<float>(k)) {
        CAPTURE(i);
        CHECK(once[i] == doctest::Approx(expected[i]));
        break;
      }
  }
}

}  // namespace tmod_test_kernels_gemm
