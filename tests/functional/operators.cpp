// Tensor operators + - * / and unary -, with tensors and scalars on either side, and the in-place
// += -= *= /=: against the elementwise goldens, scalar loops, and the F:: functions they mirror.
#include "functional/golden_case.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/functional/tensor_methods.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

namespace tmod_test_functional_operators {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

constexpr double rtol = 1e-6, atol = 1e-6;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    if (std::bit_cast<std::uint32_t>(a.data<float>()[i]) != std::bit_cast<std::uint32_t>(b.data<float>()[i]))
      return false;
  return true;
}

// |values| in [0.5, 2]: safe divisors.
Tensor away_from_zero(const Shape& s, std::uint64_t seed) {
  Tensor t = tmod::randn(s, seed);
  for (float& v : t.values<float>()) v = std::copysign(0.5f + std::fmod(std::abs(v), 1.5f), v);
  return t;
}

// One arithmetic operator with the functional op and the in-place operator it stands for.
struct arithmetic {
  std::string_view golden_op;
  std::function<Tensor(const Tensor&, const Tensor&)> infix, functional;
  std::function<void(Tensor&, const Tensor&)> in_place;
};

const arithmetic arithmetics[] = {
    {"add", [](const Tensor& a, const Tensor& b) { return a + b; },
     [](const Tensor& a, const Tensor& b) { return F::add(a, b); }, [](Tensor& a, const Tensor& b) { a += b; }},
    {"sub", [](const Tensor& a, const Tensor& b) { return a - b; },
     [](const Tensor& a, const Tensor& b) { return F::sub(a, b); }, [](Tensor& a, const Tensor& b) { a -= b; }},
    {"mul", [](const Tensor& a, const Tensor& b) { return a * b; },
     [](const Tensor& a, const Tensor& b) { return F::mul(a, b); }, [](Tensor& a, const Tensor& b) { a *= b; }},
    {"div", [](const Tensor& a, const Tensor& b) { return a / b; },
     [](const Tensor& a, const Tensor& b) { return F::div(a, b); }, [](Tensor& a, const Tensor& b) { a /= b; }},
};

TEST_CASE("functional: tensor operators match the goldens and the F:: ops") {
  for (const arithmetic& op : arithmetics) {
    golden_case::for_each_case(op.golden_op, [&](const std::string& name, golden_case::Args&) {
      const auto in = golden_case::inputs(name, 2, 2);
      const Tensor expected = golden::load(name, "out");
      const Tensor y = op.infix(in[0], in[1]);
      golden::check_close(y, expected, rtol, atol, name);
      CHECK_MESSAGE(same_bits(y, op.functional(in[0], in[1])), name << ": operator and F:: op differ");

      // In place: allowed when the left operand already has the broadcast shape.
      Tensor target = in[0].clone();
      const Tensor alias = target;  // shares the buffer: must see the update
      if (expected.shape() == in[0].shape()) {
        op.in_place(target, in[1]);
        golden::check_close(target, expected, rtol, atol, name + " (in place)");
        CHECK(same_bits(alias, target));
        CHECK(target.shares_storage_with(alias));
      } else {
        CHECK_THROWS_AS(op.in_place(target, in[1]), tmod::shape_error);
        CHECK(same_bits(target, in[0]));
      }
    });
  }
}

TEST_CASE("functional: operators with scalars on either side, against a scalar loop") {
  const Tensor x = away_from_zero({3, 17}, 5);
  const float s = -2.25f;
  const Tensor results[] = {x + s, s + x, x - s, s - x, x * s, s * x, x / s, s / x, -x};
  for (const Tensor& y : results) REQUIRE(y.shape() == x.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float a = x.data<float>()[i];
    const float expected[] = {a + s, s + a, a - s, s - a, a * s, s * a, a / s, s / a, -a};
    for (std::size_t k = 0; k < std::size(results); ++k) {
      CAPTURE(k);
      CHECK(results[k].data<float>()[i] == expected[k]);
    }
  }
  // Each operator runs the same op as its functional twin (reflected forms swap the operands).
  CHECK(same_bits(s - x, F::sub(s, x)));
  CHECK(same_bits(s / x, F::div(s, x)));
  CHECK(same_bits(x / s, F::div(x, s)));
  CHECK(same_bits(-x, F::neg(x)));
  CHECK(same_bits(s - x, F::method_rsub(x, s)));
  CHECK(same_bits(s / x, F::method_rtruediv(x, s)));
  // int, double and compile-time constants on either side
  CHECK(same_bits(x * 2, x * 2.f));
  CHECK(same_bits(3 - x, 3.f - x));
  CHECK(same_bits(x / 4.0, x / 4.f));
  CHECK(same_bits(tmod::c<2> * x, 2.f * x));
  CHECK(same_bits(x + tmod::c<1>, x + 1.f));
}

TEST_CASE("functional: operators compose and broadcast") {
  const Tensor a = tmod::arange(0, 6).reshape({2, 3});
  const Tensor b = tmod::tensor({10.f, 20.f, 30.f});
  const Tensor y = -(a * 2.f + b) / 2.f - 1.f;  // -(2a + b)/2 - 1
  REQUIRE(y.shape() == Shape{2, 3});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) CHECK(y.at({i, j}) == -(a.at({i, j}) * 2.f + b.at({j})) / 2.f - 1.f);
  const Tensor r0 = tmod::scalar_tensor(3.f) * tmod::scalar_tensor(-2.f) + 1;
  CHECK(r0.shape() == Shape{});
  CHECK(r0.item() == -5.f);
}

TEST_CASE("functional: in-place operators with scalars, broadcasting and views") {
  const Tensor x = away_from_zero({4, 9}, 9);
  const float s = 0.75f;
  Tensor add = x.clone(), sub = x.clone(), mul = x.clone(), div = x.clone();
  CHECK(&(add += s) == &add);  // returns the left operand
  sub -= s;
  mul *= s;
  div /= s;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float a = x.data<float>()[i];
    CHECK(add.data<float>()[i] == a + s);
    CHECK(sub.data<float>()[i] == a - s);
    CHECK(mul.data<float>()[i] == a * s);
    CHECK(div.data<float>()[i] == a / s);
  }

  // (4, 9) op= (9,), (4, 1) and rank 0: b broadcasts into a
  const Tensor row = away_from_zero({9}, 1), col = away_from_zero({4, 1}, 2), r0 = tmod::scalar_tensor(1.5f);
  Tensor y = x.clone();
  y -= row;
  y /= col;
  y *= r0;
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 9; ++j) CHECK(y.at({i, j}) == (x.at({i, j}) - row.at({j})) / col.at({i, 0}) * 1.5f);

  // A reshaped view shares the buffer, so an in-place update through it is seen by the original.
  Tensor base = x.clone();
  Tensor view = base.reshape({36});
  view += 1.f;
  for (std::int64_t i = 0; i < x.numel(); ++i) CHECK(base.data<float>()[i] == x.data<float>()[i] + 1.f);

  // Empty tensors and rank 0 stay as they are.
  Tensor empty = tmod::zeros({0, 3});
  empty += tmod::ones({3});
  CHECK(empty.shape() == Shape{0, 3});
  Tensor scalar = tmod::scalar_tensor(2.f);
  scalar *= 4.f;
  CHECK(scalar.item() == 8.f);
}

TEST_CASE("functional: in-place operators reject a shape change and bad operands") {
  Tensor x = tmod::ones({3, 1});
  const Tensor before = x.clone();
  CHECK_THROWS_AS(x += tmod::ones({1, 4}), tmod::shape_error);   // the result would be (3, 4)
  CHECK_THROWS_AS(x *= tmod::ones({2, 3, 1}), tmod::shape_error);  // the result would gain an axis
  CHECK(same_bits(x, before));
  Tensor ints = tmod::zeros({3}, tmod::DType::int32);
  CHECK_THROWS_AS(ints += 1.f, tmod::dtype_error);
  CHECK_THROWS_AS(x -= tmod::zeros({3, 1}, tmod::DType::int32), tmod::dtype_error);
  Tensor undefined;
  CHECK_THROWS_AS(undefined /= 2.f, tmod::value_error);
}

}  // namespace

}  // namespace tmod_test_functional_operators
