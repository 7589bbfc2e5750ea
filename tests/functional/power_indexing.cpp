// pow, square, sqrt, rsqrt, astype and getitem in eager mode, against scalar loops and hand-computed
// values, and their bad input.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tmod_test_functional_power_indexing {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

/// Equal bits, NaN equal to NaN.
bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

/// Lengths around a vector and its tail: 37 elements, with negatives, zeros and fractions.
const Tensor x = tmod::uniform({37}, -4.f, 4.f, 7);
const Tensor positive = tmod::uniform({37}, 0.f, 9.f, 8);

/// 0, 1, ..., n - 1 as a float32 tensor of shape s.
Tensor iota(const Shape& s) {
  return tmod::arange(0.0, static_cast<double>(s.numel())).reshape(s);
}

}  // namespace

TEST_CASE("functional: pow equals std::pow element by element, with a tensor or a number on either side") {
  const Tensor y = F::pow(x, 3);
  const Tensor half = F::pow(positive, 0.5f);
  const Tensor base2 = F::pow(2.f, x);
  const Tensor both = F::pow(x, positive);
  const Tensor method = F::method_pow(x, 2);
  const Tensor reflected = F::method_rpow(x, 2);  // 2 ** x
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float a = x.data<float>()[i], b = positive.data<float>()[i];
    CHECK(same(y.data<float>()[i], std::pow(a, 3.f)));
    CHECK(same(half.data<float>()[i], std::pow(b, 0.5f)));
    CHECK(same(base2.data<float>()[i], std::pow(2.f, a)));
    CHECK(same(both.data<float>()[i], std::pow(a, b)));
    CHECK(same(method.data<float>()[i], std::pow(a, 2.f)));
    CHECK(same(reflected.data<float>()[i], std::pow(2.f, a)));
  }
  // Hand-computed: a negative base keeps its sign for an odd integral exponent, is NaN for a fraction.
  const Tensor neg = F::pow(tmod::tensor({-2.f, -2.f, 0.f, 4.f}), tmod::tensor({3.f, 0.5f, -1.f, -0.5f}));
  CHECK(neg.at({0}) == -8.f);
  CHECK(std::isnan(neg.at({1})));
  CHECK(neg.at({2}) == std::numeric_limits<float>::infinity());
  CHECK(neg.at({3}) == 0.5f);
}

TEST_CASE("functional: pow broadcasts as numpy does") {
  const Tensor a = iota({2, 1, 3});
  const Tensor b = tmod::tensor({{1.f, 2.f, 0.f}, {0.5f, 1.f, 3.f}});  // (2, 3)
  const Tensor y = F::pow(a, b);
  REQUIRE(y.shape() == Shape{2, 2, 3});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 2; ++j)
      for (std::int64_t k = 0; k < 3; ++k) CHECK(same(y.at({i, j, k}), std::pow(a.at({i, 0, k}), b.at({j, k}))));
  CHECK_THROWS_AS(F::pow(iota({2, 3}), iota({4})), tmod::shape_error);
}

TEST_CASE("functional: square, sqrt and rsqrt equal their scalar formulas bit for bit") {
  const Tensor sq = F::square(x), rt = F::sqrt(positive), rs = F::rsqrt(positive);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float a = x.data<float>()[i], b = positive.data<float>()[i];
    CHECK(same(sq.data<float>()[i], a * a));
    CHECK(same(rt.data<float>()[i], std::sqrt(b)));
    CHECK(same(rs.data<float>()[i], 1.f / std::sqrt(b)));
  }
  const Tensor edge = F::rsqrt(tmod::tensor({0.f, 4.f, -1.f, 0.25f}));
  CHECK(edge.at({0}) == std::numeric_limits<float>::infinity());
  CHECK(edge.at({1}) == 0.5f);
  CHECK(std::isnan(edge.at({2})));
  CHECK(edge.at({3}) == 2.f);
}

TEST_CASE("functional: the power ops compute in float32 and refuse int32, naming the op") {
  const Tensor i = tmod::tensor({1, 2, 3});
  CHECK_THROWS_AS(F::square(i), tmod::dtype_error);
  CHECK_THROWS_AS(F::pow(i, 2), tmod::dtype_error);
  try {
    (void)F::rsqrt(i);
    FAIL("no error");
  } catch (const tmod::dtype_error& e) {
    CHECK(std::string(e.what()).find("elemwise.rsqrt") != std::string::npos);
  }
}

TEST_CASE("functional: astype converts float32 and int32, truncating toward zero and saturating") {
  const float big = 3e9f, nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor f = tmod::tensor({1.9f, -1.9f, 0.5f, -0.f, big, -big, nan, inf, -inf, 2147483520.f, -2147483648.f});
  const Tensor i = F::astype(f, tmod::int32);
  REQUIRE(i.dtype() == tmod::DType::int32);
  REQUIRE(i.shape() == f.shape());
  const std::vector<std::int32_t> expected{1, -1, 0, 0, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 2147483520, INT32_MIN};
  for (std::size_t k = 0; k < expected.size(); ++k) CHECK(i.data<std::int32_t>()[k] == expected[k]);

  const Tensor back = F::astype(tmod::tensor({16777217, -3, 0}), tmod::float32);
  REQUIRE(back.dtype() == tmod::DType::float32);
  CHECK(back.at({0}) == 16777216.f);  // 2^24 + 1 rounds to the even neighbour
  CHECK(back.at({1}) == -3.f);

  const Tensor same_dtype = F::astype(f, tmod::float32);  // a copy, as numpy's astype
  CHECK_FALSE(same_dtype.shares_storage_with(f));
  CHECK(same_dtype.at({0}) == 1.9f);
  CHECK_THROWS_AS(F::astype(Tensor(), tmod::int32), tmod::value_error);
}

TEST_CASE("functional: getitem slices, picks and steps as Python does") {
  const Tensor a = iota({3, 4, 5});
  // a[:, 1:3] -> (3, 2, 5)
  const Tensor s = F::getitem(a, tmod::all, tmod::slice(1, 3));
  REQUIRE(s.shape() == Shape{3, 2, 5});
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 2; ++j)
      for (std::int64_t k = 0; k < 5; ++k) CHECK(s.at({i, j, k}) == a.at({i, j + 1, k}));
  // a[..., 0] -> (3, 4)
  const Tensor e = F::getitem(a, tmod::ellipsis, 0);
  REQUIRE(e.shape() == Shape{3, 4});
  CHECK(e.at({2, 3}) == a.at({2, 3, 0}));
  // a[-1, ::2, ::-2] -> (2, 3): rows 0 and 2, columns 4, 2, 0
  const Tensor n = F::getitem(a, -1, tmod::slice(tmod::none, tmod::none, 2), tmod::slice(tmod::none, tmod::none, -2));
  REQUIRE(n.shape() == Shape{2, 3});
  CHECK(n.at({0, 0}) == a.at({2, 0, 4}));
  CHECK(n.at({1, 2}) == a.at({2, 2, 0}));
  // a[1, 2, 3] -> rank 0; a[0:1] keeps the axis; bounds beyond the axis clamp; an empty slice
  CHECK(F::getitem(a, 1, 2, 3).shape() == Shape{});
  CHECK(F::getitem(a, 1, 2, 3).item() == a.at({1, 2, 3}));
  CHECK(F::getitem(a, tmod::slice(0, 1)).shape() == Shape{1, 4, 5});
  CHECK(F::getitem(a, tmod::slice(-100, 100)).shape() == Shape{3, 4, 5});
  CHECK(F::getitem(a, tmod::all, tmod::slice(3, 1)).shape() == Shape{3, 0, 5});
  // a[1:, ..., -2:] and a[2::-1]: the reversed rows 2, 1, 0
  const Tensor m = F::getitem(a, tmod::slice(1, tmod::none), tmod::ellipsis, tmod::slice(-2, tmod::none));
  REQUIRE(m.shape() == Shape{2, 4, 2});
  CHECK(m.at({1, 3, 1}) == a.at({2, 3, 4}));
  const Tensor r = F::getitem(a, tmod::slice(2, tmod::none, -1));
  REQUIRE(r.shape() == Shape{3, 4, 5});
  CHECK(r.at({0, 1, 1}) == a.at({2, 1, 1}));
  CHECK(r.at({2, 1, 1}) == a.at({0, 1, 1}));
  // a copy, in any dtype
  CHECK_FALSE(s.shares_storage_with(a));
  const Tensor ints = F::getitem(tmod::tensor({{1, 2, 3}, {4, 5, 6}}), tmod::all, -1);
  REQUIRE(ints.dtype() == tmod::DType::int32);
  CHECK(ints.at<std::int32_t>({1}) == 6);
}

TEST_CASE("functional: getitem's bad indices are errors naming the op and the shape") {
  const Tensor a = iota({2, 3});
  const auto message = [&](auto&& f) {
    try {
      f();
    } catch (const tmod::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string out_of_range = message([&] { (void)F::getitem(a, tmod::all, 3); });
  CHECK(out_of_range.find("__getitem__") != std::string::npos);
  CHECK(out_of_range.find("(2, 3)") != std::string::npos);
  CHECK_THROWS_AS(F::getitem(a, tmod::all, 3), tmod::shape_error);
  CHECK_THROWS_AS(F::getitem(a, -3), tmod::shape_error);
  CHECK_THROWS_AS(F::getitem(a, 0, 0, 0), tmod::shape_error);  // too many indices
  CHECK(message([&] { (void)F::getitem(a, 0, 0, 0); }).find("too many indices") != std::string::npos);
  CHECK_THROWS_AS(F::getitem(a, tmod::ellipsis, tmod::ellipsis), tmod::value_error);
  CHECK_THROWS_AS(F::getitem(a, tmod::slice(0, 2, 0)), tmod::value_error);  // step 0
}

TEST_CASE("functional: an index prints as Python's repr and parses back") {
  const F::index_spec spec{{tmod::all, tmod::slice(1, 3), tmod::ellipsis, std::int64_t{-1}, tmod::slice(tmod::none, tmod::none, -2)}};
  const std::string text = F::repr(spec);
  CHECK(text == "(slice(None, None, None), slice(1, 3, None), Ellipsis, -1, slice(None, None, -2))");
  CHECK(F::from_value<F::index_spec>(F::to_value(spec), "__getitem__", "index") == spec);
  CHECK(F::repr(F::index_spec{{std::int64_t{0}}}) == "0");
  CHECK(F::from_value<F::index_spec>(tmod::Value("0"), "__getitem__", "index") == F::index_spec{{std::int64_t{0}}});
  CHECK_THROWS_AS(F::from_value<F::index_spec>(tmod::Value("(slice(1, 2), 0)"), "__getitem__", "index"), tmod::value_error);
  CHECK_THROWS_AS(F::from_value<F::index_spec>(tmod::Value("99999999999999999999"), "__getitem__", "index"),
                  tmod::value_error);
  CHECK(F::repr(tmod::DType::int32) == "int32");
  CHECK(F::from_value<tmod::DType>(tmod::Value("int32"), "astype", "dtype") == tmod::DType::int32);
  CHECK(F::from_value<tmod::DType>(tmod::Value("int8"), "astype", "dtype") == tmod::DType::int8);
  CHECK_THROWS_AS(F::from_value<tmod::DType>(tmod::Value("int16"), "astype", "dtype"), tmod::value_error);
}

}  // namespace tmod_test_functional_power_indexing
