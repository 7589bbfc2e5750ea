// bool tensors in eager mode: the dtype (factories, data<bool>, npy), astype to and from bool, the
// comparisons, the logical ops, where and broadcast_to against scalar loops with hand-written
// broadcasting, and their bad input.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/npy.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace tmod_test_functional_compare {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

/// A (2, 1, 3) float tensor and a (4, 3) one with repeated values, so every comparison has both outcomes.
const Tensor a = tmod::tensor({{{1.f, -2.f, 3.f}}, {{0.f, 5.f, -1.f}}});
const Tensor b = tmod::tensor({{1.f, 0.f, 3.f}, {0.f, 5.f, 2.f}, {-2.f, -2.f, -1.f}, {4.f, 1.f, 3.f}});

/// A bool tensor of `shape` from 0/1 values.
Tensor mask(std::initializer_list<int> v, const Shape& shape) {
  std::array<bool, 32> bits{};
  std::size_t i = 0;
  for (int x : v) bits[i++] = x != 0;
  return tmod::tensor(std::span<const bool>(bits.data(), i), shape);
}

/// Checks y[i, j, k] == f(a[i, 0, k], b[j, k]) for the (2, 4, 3) broadcast of a and b (T: the
/// operands' element type, R: the result's).
template <class T, class R = bool, class Fn>
void check_broadcast(const Tensor& y, const Tensor& x0, const Tensor& x1, Fn f) {
  REQUIRE(y.shape() == Shape{2, 4, 3});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t k = 0; k < 3; ++k)
        CHECK(y.at<R>({i, j, k}) == f(x0.at<T>({i, 0, k}), x1.at<T>({j, k})));
}

}  // namespace

TEST_CASE("bool dtype: one byte per element, named bool, built by the factories and read as bool") {
  CHECK(tmod::itemsize(tmod::bool_) == 1);
  CHECK(tmod::dtype_name(tmod::bool_) == "bool");
  static_assert(tmod::dtype_of_v<bool> == tmod::DType::boolean);
  const Tensor z = tmod::zeros({2, 3}, tmod::bool_), o = tmod::ones({5}, tmod::bool_);
  CHECK(z.dtype() == tmod::bool_);
  CHECK(z.nbytes() == 6);
  for (bool v : z.values<bool>()) CHECK(!v);
  for (bool v : o.values<bool>()) CHECK(v);
  CHECK(tmod::full({3}, 0.5, tmod::bool_).at<bool>({2}));
  const Tensor lit = tmod::tensor({{true, false}, {false, true}});
  REQUIRE(lit.dtype() == tmod::bool_);
  CHECK(lit.at<bool>({0, 0}));
  CHECK(!lit.at<bool>({1, 0}));
  CHECK_THROWS_AS((void)z.data<float>(), tmod::dtype_error);
}

TEST_CASE("bool dtype: .npy files hold it as numpy's '|b1'; other bytes are refused") {
  const Tensor m = mask({1, 0, 0, 1, 1, 0}, {2, 3});
  const std::string bytes = tmod::io::to_npy_bytes(m);
  CHECK(bytes.find("'descr': '|b1'") != std::string::npos);
  const Tensor back = tmod::io::parse_npy(std::as_bytes(std::span(bytes.data(), bytes.size())), "mem");
  REQUIRE(back.dtype() == tmod::bool_);
  REQUIRE(back.shape() == m.shape());
  for (std::int64_t i = 0; i < 6; ++i) CHECK(back.data<bool>()[i] == m.data<bool>()[i]);
  std::string bad = bytes;
  bad.back() = '\x02';
  CHECK_THROWS_AS((void)tmod::io::parse_npy(std::as_bytes(std::span(bad.data(), bad.size())), "mem"),
                  tmod::format_error);
}

TEST_CASE("astype: to bool is nonzero (NaN included), from bool is 0 or 1") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor f = tmod::tensor({0.f, -0.f, 0.5f, -3.f, nan});
  const Tensor fb = F::astype(f, tmod::bool_);
  REQUIRE(fb.dtype() == tmod::bool_);
  const std::array<bool, 5> want{false, false, true, true, true};
  for (std::size_t i = 0; i < 5; ++i) CHECK(fb.data<bool>()[i] == want[i]);
  const Tensor ib = F::astype(tmod::tensor({0, 7, -1}), tmod::bool_);
  CHECK(!ib.at<bool>({0}));
  CHECK(ib.at<bool>({1}));
  CHECK(ib.at<bool>({2}));
  const Tensor m = mask({1, 0, 1}, {3});
  const Tensor bf = F::astype(m, tmod::float32), bi = F::astype(m, tmod::int32);
  CHECK(bf.at({0}) == 1.f);
  CHECK(bf.at({1}) == 0.f);
  CHECK(bi.at<std::int32_t>({2}) == 1);
  CHECK(bi.at<std::int32_t>({1}) == 0);
}

TEST_CASE("comparisons: float32 and int32 broadcast as numpy and give bool, as the scalar predicate") {
  check_broadcast<float>(F::equal(a, b), a, b, [](float x, float y) { return x == y; });
  check_broadcast<float>(F::not_equal(a, b), a, b, [](float x, float y) { return x != y; });
  check_broadcast<float>(F::less(a, b), a, b, [](float x, float y) { return x < y; });
  check_broadcast<float>(F::less_equal(a, b), a, b, [](float x, float y) { return x <= y; });
  check_broadcast<float>(F::greater(a, b), a, b, [](float x, float y) { return x > y; });
  check_broadcast<float>(F::greater_equal(a, b), a, b, [](float x, float y) { return x >= y; });
  const Tensor ai = F::astype(a, tmod::int32), bi = F::astype(b, tmod::int32);
  check_broadcast<std::int32_t>(F::less(ai, bi), ai, bi, [](std::int32_t x, std::int32_t y) { return x < y; });
  check_broadcast<std::int32_t>(F::equal(ai, bi), ai, bi, [](std::int32_t x, std::int32_t y) { return x == y; });
  CHECK(F::equal(a, b).dtype() == tmod::bool_);
  // NaN compares unequal to everything, itself included.
  const Tensor n = tmod::tensor({std::numeric_limits<float>::quiet_NaN()});
  CHECK(!F::equal(n, n).at<bool>({0}));
  CHECK(F::not_equal(n, n).at<bool>({0}));
}

TEST_CASE("logical ops: not, and, or, xor on bool, broadcast as numpy") {
  const Tensor p = mask({1, 0}, {2, 1}), q = mask({1, 0, 1}, {3});
  const Tensor y_and = F::logical_and(p, q), y_or = F::logical_or(p, q), y_xor = F::logical_xor(p, q);
  REQUIRE(y_and.shape() == Shape{2, 3});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      const bool x = p.at<bool>({i, 0}), y = q.at<bool>({j});
      CHECK(y_and.at<bool>({i, j}) == (x && y));
      CHECK(y_or.at<bool>({i, j}) == (x || y));
      CHECK(y_xor.at<bool>({i, j}) == (x != y));
    }
  const Tensor n = F::logical_not(q);
  for (std::int64_t j = 0; j < 3; ++j) CHECK(n.at<bool>({j}) == !q.at<bool>({j}));
}

TEST_CASE("where: picks x where the mask holds, y elsewhere, broadcasting all three") {
  const Tensor m = mask({1, 0, 0, 1}, {4, 1});  // (4, 1)
  const Tensor y = F::where(m, a, b);             // (2, 1, 3), (4, 3) -> (2, 4, 3)
  REQUIRE(y.shape() == Shape{2, 4, 3});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t k = 0; k < 3; ++k)
        CHECK(y.at({i, j, k}) == (m.at<bool>({j, 0}) ? a.at({i, 0, k}) : b.at({j, k})));
  // The attention-mask form: where(mask, -inf, 0) over rank-0 values.
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor bias = F::where(mask({0, 1, 1}, {3}), tmod::scalar_tensor(-inf), tmod::scalar_tensor(0.f));
  CHECK(bias.at({0}) == 0.f);
  CHECK(bias.at({1}) == -inf);
  const Tensor ints = F::where(mask({1, 0}, {2}), tmod::tensor({1, 2}), tmod::tensor({7}));
  CHECK(ints.dtype() == tmod::int32);
  CHECK(ints.at<std::int32_t>({0}) == 1);
  CHECK(ints.at<std::int32_t>({1}) == 7);
}

TEST_CASE("broadcast_to: repeats the operand along the stretched axes, any dtype") {
  const Tensor y = F::broadcast_to(a, {2, 4, 3});
  check_broadcast<float, float>(y, a, b, [](float x, float) { return x; });
  const Tensor m = F::broadcast_to(mask({1, 0}, {2, 1}), {3, 2, 2});
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 2; ++j)
      for (std::int64_t k = 0; k < 2; ++k) CHECK(m.at<bool>({i, j, k}) == (j == 0));
  CHECK_THROWS_AS((void)F::broadcast_to(a, {2, 3}), tmod::shape_error);
}

TEST_CASE("bool ops: bad input is a clear error naming the op, the operands and their shapes") {
  const Tensor m = mask({1, 0, 1}, {3});
  const auto message = [](auto&& f) {
    try {
      f();
    } catch (const tmod::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string cond = message([&] { (void)F::where(a, a, b); });
  CHECK(cond.find("tensor.where") != std::string::npos);
  CHECK(cond.find("'mask' (float32, shape (2, 1, 3))") != std::string::npos);
  CHECK_THROWS_AS((void)F::where(a, a, b), tmod::dtype_error);
  const std::string mixed = message([&] { (void)F::less(a, F::astype(b, tmod::int32)); });
  CHECK(mixed.find("elemwise.less") != std::string::npos);
  CHECK(mixed.find("int32, shape (4, 3))") != std::string::npos);
  const std::string shapes = message([&] { (void)F::equal(a, tmod::zeros({5})); });
  CHECK(shapes.find("elemwise.equal") != std::string::npos);
  CHECK(shapes.find("(2, 1, 3)") != std::string::npos);
  CHECK(shapes.find("(5,)") != std::string::npos);
  CHECK_THROWS_AS((void)F::where(m, a, tmod::zeros({4})), tmod::shape_error);
  CHECK_THROWS_AS((void)F::logical_and(m, a), tmod::dtype_error);
  CHECK_THROWS_AS((void)F::logical_not(a), tmod::dtype_error);
  // Ops that compute in float32 refuse bool as they refuse int32.
  CHECK_THROWS_AS((void)F::relu(m), tmod::dtype_error);
  CHECK_THROWS_AS((void)F::add(m, m), tmod::dtype_error);
}

}  // namespace tmod_test_functional_compare
