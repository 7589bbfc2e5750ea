// matmul and linear against the PyTorch goldens and a float64 scalar loop: 1-D operands, batch
// broadcasting, transposed operands, empty products, rank-3 and rank-1 linear inputs.
#include "functional/golden_case.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/linalg.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

namespace tmod_test_functional_linalg {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

// A float32 dot product of length k is within about k * eps * sum|a_i b_i| of the exact one; the
// goldens' inputs are O(1), so the absolute floor grows with k and the relative part covers the rest.
constexpr double rtol = 1e-5;
double atol_for(std::int64_t k) { return 1e-6 + 2e-7 * static_cast<double>(k); }

TEST_CASE("functional: matmul matches the goldens") {
  const std::size_t count = golden_case::for_each_case("matmul", [](const std::string& name, auto& args) {
    const F::matmul_fn::params p{.transpose_a = args.flag("transpose_a", false),
                                 .transpose_b = args.flag("transpose_b", false)};
    const auto in = golden_case::inputs(name, 2, 2);
    const Tensor y = F::matmul(in[0], in[1], p);
    const Shape& a = in[0].shape();
    const std::int64_t k = p.transpose_a && a.rank() > 1 ? a[a.rank() - 2] : a.back();
    golden::check_close(y, golden::load(name, "out"), rtol, atol_for(k), name);
  });
  CHECK(count >= 15);
}

TEST_CASE("functional: linear matches the goldens, with and without bias") {
  const std::size_t count = golden_case::for_each_case("linear", [](const std::string& name, golden_case::Args&) {
    const auto in = golden_case::inputs(name, 2, 3);
    const Tensor y = in.size() == 3 ? F::linear(in[0], in[1], in[2]) : F::linear(in[0], in[1]);
    golden::check_close(y, golden::load(name, "out"), rtol, atol_for(in[1].size(1)), name);
    if (in.size() == 2) golden::check_close(F::linear(in[0], in[1], tmod::none), y, 0, 0, name);
  });
  CHECK(count >= 10);
}

// out[batch..., i, j] = sum_k a[..., i, k] b[..., k, j] in float64, with numpy's broadcasting of
// the batch axes; a 1-D operand is a row (a) or a column (b) whose axis is dropped from the result.
Tensor reference_matmul(const Tensor& a, const Tensor& b) {
  const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  const Tensor a2 = a_vec ? a.reshape({1, a.size(0)}) : a;
  const Tensor b2 = b_vec ? b.reshape({b.size(0), 1}) : b;
  const std::int64_t m = a2.size(-2), k = a2.size(-1), n = b2.size(-1);
  REQUIRE(b2.size(-2) == k);
  const Shape ab(a2.shape().begin(), a2.shape().end() - 2), bb(b2.shape().begin(), b2.shape().end() - 2);
  const Shape batch = tmod::broadcast_shapes(ab, bb, "reference");
  Shape out = batch;
  if (!a_vec) out.push_back(m);
  if (!b_vec) out.push_back(n);
  Tensor y = tmod::Tensor::empty(out);
  // Offset of the matrix of `s`'s batch at the broadcast batch index `flat`.
  const auto offset = [&](const Shape& s, std::int64_t flat) {
    std::int64_t off = 0, stride = 1;
    for (std::size_t d = batch.rank(); d-- > 0;) {
      const std::int64_t idx = flat % batch[d];
      flat /= batch[d];
      const std::size_t lead = batch.rank() - s.rank();
      if (d >= lead) {
        const std::int64_t extent = s[d - lead];
        off += (extent == 1 ? 0 : idx) * stride;
        stride *= extent;
      }
    }
    return off;
  };
  for (std::int64_t t = 0; t < batch.numel(); ++t) {
    const float* pa = a2.data<float>() + offset(ab, t) * m * k;
    const float* pb = b2.data<float>() + offset(bb, t) * k * n;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (std::int64_t q = 0; q < k; ++q) sum += static_cast<double>(pa[i * k + q]) * pb[q * n + j];
        y.data<float>()[(t * m + i) * n + j] = static_cast<float>(sum);
      }
  }
  return y;
}

Tensor transposed_last2(const Tensor& t) {
  const std::int64_t r = t.size(-2), c = t.size(-1);
  const std::int64_t mats = Shape(t.shape().begin(), t.shape().end() - 2).numel();
  Shape s = t.shape();
  s[s.rank() - 2] = c;
  s[s.rank() - 1] = r;
  Tensor y = tmod::Tensor::empty(s);
  for (std::int64_t q = 0; q < mats; ++q)
    for (std::int64_t i = 0; i < r; ++i)
      for (std::int64_t j = 0; j < c; ++j)
        y.data<float>()[q * r * c + j * r + i] = t.data<float>()[q * r * c + i * c + j];
  return y;
}

TEST_CASE("functional: matmul with 1-D operands and broadcast batches, against a scalar loop") {
  struct shapes {
    Shape a, b, out;
  };
  const shapes cases[] = {
      {{13}, {13}, {}},                    // dot product: rank 0
      {{5}, {5, 3}, {3}},                  // vector @ matrix
      {{4, 5}, {5}, {4}},                  // matrix @ vector
      {{7}, {2, 7, 3}, {2, 3}},            // vector @ batch
      {{2, 3, 7}, {7}, {2, 3}},            // batch @ vector
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},      // matrix broadcast over b's batch
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},      // matrix broadcast over a's batch
      {{2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6}},  // batch axes broadcast against each other
      {{1, 3, 17, 9}, {2, 1, 9, 33}, {2, 3, 17, 33}},
      {{3, 1, 4}, {3, 4, 1}, {3, 1, 1}},
      {{2, 0, 4}, {4, 3}, {2, 0, 3}},      // empty rows
      {{2, 3, 0}, {2, 0, 5}, {2, 3, 5}},   // empty reduction: zeros
      {{0, 3, 4}, {4, 2}, {0, 3, 2}},      // empty batch
  };
  std::uint64_t seed = 1;
  for (const shapes& c : cases) {
    CAPTURE(c.a.to_string());
    CAPTURE(c.b.to_string());
    const Tensor a = tmod::randn(c.a, seed++), b = tmod::randn(c.b, seed++);
    const Tensor y = F::matmul(a, b);
    REQUIRE(y.shape() == c.out);
    golden::check_close(y, reference_matmul(a, b), rtol, atol_for(c.a.back()));
    // transpose flags act on the last two axes of 2-D+ operands only
    if (c.a.rank() >= 2 && c.b.rank() >= 2) {
      const Tensor yt = F::matmul(transposed_last2(a), transposed_last2(b), {.transpose_a = true, .transpose_b = true});
      golden::check_close(yt, y, rtol, atol_for(c.a.back()));
    }
  }
}

TEST_CASE("functional: matmul at sizes around the GEMM blocking") {
  for (std::int64_t m : {1, 15, 17, 64}) {
    for (std::int64_t k : {1, 16, 33, 300}) {
      for (std::int64_t n : {1, 31, 65}) {
        CAPTURE(m);
        CAPTURE(k);
        CAPTURE(n);
        const Tensor a = tmod::randn({m, k}, 7), b = tmod::randn({k, n}, 8);
        golden::check_close(F::matmul(a, b), reference_matmul(a, b), rtol, atol_for(k));
        golden::check_close(F::matmul(transposed_last2(a), b, {.transpose_a = true}), reference_matmul(a, b), rtol,
                            atol_for(k));
        golden::check_close(F::matmul(a, transposed_last2(b), {.transpose_b = true}), reference_matmul(a, b), rtol,
                            atol_for(k));
      }
    }
  }
}

TEST_CASE("functional: linear on rank-1, rank-3 and rank-4 inputs") {
  const Tensor w = tmod::randn({6, 11}, 3), b = tmod::randn({6}, 4);
  for (const Shape& s : {Shape{11}, Shape{2, 5, 11}, Shape{2, 1, 3, 11}, Shape{0, 11}}) {
    CAPTURE(s.to_string());
    const Tensor x = tmod::randn(s, 5);
    const Tensor y = F::linear(x, w, b);
    Shape out(s.begin(), s.end() - 1);
    out.push_back(6);
    REQUIRE(y.shape() == out);
    // Reference: every row of x against every row of w, plus the bias.
    const std::int64_t rows = x.numel() / 11;
    Tensor expected = tmod::Tensor::empty(out);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t o = 0; o < 6; ++o) {
        double sum = b.data<float>()[o];
        for (std::int64_t i = 0; i < 11; ++i)
          sum += static_cast<double>(x.data<float>()[r * 11 + i]) * w.data<float>()[o * 11 + i];
        expected.data<float>()[r * 6 + o] = static_cast<float>(sum);
      }
    golden::check_close(y, expected, rtol, atol_for(11));
  }
}

TEST_CASE("functional: matmul and linear leave their inputs unchanged") {
  const Tensor a = tmod::randn({5, 7}, 1), w = tmod::randn({3, 7}, 2), b = tmod::randn({3}, 3);
  const Tensor a0 = a.clone(), w0 = w.clone(), b0 = b.clone();
  (void)F::linear(a, w, b);
  (void)F::matmul(a, w, {.transpose_b = true});
  golden::check_close(a, a0, 0, 0);
  golden::check_close(w, w0, 0, 0);
  golden::check_close(b, b0, 0, 0);
}

}  // namespace

}  // namespace tmod_test_functional_linalg
