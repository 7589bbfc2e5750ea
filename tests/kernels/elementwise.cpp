#include <tracemod/kernels/elementwise.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace tmod_test_kernels_elementwise {

namespace {

namespace k = tracemod::kernels;
using tracemod::Shape;

constexpr auto width = static_cast<std::int64_t>(k::simd_width);
constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float qnan = std::numeric_limits<float>::quiet_NaN();
const std::vector<std::int64_t> sizes{0, 1, width - 1, width + 1, 1000, 4097};

// Reference results are computed in double with std:: math, then rounded to float.
using unary_ref = std::function<double(double)>;
using binary_ref = std::function<double(double, double)>;

// Distance in representable floats; +0 and -0 are the same point, NaN matches only NaN.
std::int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : std::int64_t{1} << 40;
  const auto ordered = [](float f) {
    const auto i = std::bit_cast<std::int32_t>(f);
    return i < 0 ? std::int64_t{std::numeric_limits<std::int32_t>::min()} - i : std::int64_t{i};
  };
  return std::abs(ordered(a) - ordered(b));
}

// n values uniform in [lo, hi], with `specials` spread over the first positions.
std::vector<float> sample(std::int64_t n, float lo, float hi, unsigned seed, const std::vector<float>& specials = {}) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(gen);
  for (std::size_t i = 0; i < specials.size() && i < v.size(); ++i) v[i * 7 % v.size()] = specials[i];
  return v;
}

const std::vector<float> float_specials{0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, qnan, 1e-40f, -1e-40f, 3e38f, -3e38f};

// A float array at a chosen misalignment, followed by guard values that must survive.
class guarded {
 public:
  static constexpr std::size_t guard = 2 * k::simd_width;
  static constexpr float guard_value = -12345.5f;

  guarded(std::int64_t n, std::size_t offset)
      : storage_(offset + static_cast<std::size_t>(n) + guard, guard_value), offset_(offset), n_(n) {}
  guarded(const std::vector<float>& v, std::size_t offset) : guarded(static_cast<std::int64_t>(v.size()), offset) {
    std::copy(v.begin(), v.end(), data());
  }

  float* data() { return storage_.data() + offset_; }
  float operator[](std::int64_t i) const { return storage_[offset_ + static_cast<std::size_t>(i)]; }
  bool guards_intact() const {
    for (std::size_t i = 0; i < storage_.size(); ++i)
      if ((i < offset_ || i >= offset_ + static_cast<std::size_t>(n_)) && storage_[i] != guard_value) return false;
    return true;
  }

 private:
  std::vector<float> storage_;
  std::size_t offset_;
  std::int64_t n_;
};

template <class Op>
void check_unary(Op op, const unary_ref& ref, float lo, float hi, std::int64_t max_ulp) {
  for (std::int64_t n : sizes)
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}})
      for (bool in_place : {false, true}) {
        CAPTURE(n);
        CAPTURE(offset);
        CAPTURE(in_place);
        const auto x = sample(n, lo, hi, static_cast<unsigned>(n), float_specials);
        guarded in(x, offset), out(n, offset + 1);
        float* y = in_place ? in.data() : out.data();
        k::unary(op, in.data(), y, n);
        for (std::int64_t i = 0; i < n; ++i) {
          const float want = static_cast<float>(ref(x[static_cast<std::size_t>(i)]));
          const float got = y[i];
          if (ulp_distance(got, want) > max_ulp) {
            CAPTURE(i);
            CAPTURE(x[static_cast<std::size_t>(i)]);
            CHECK(got == want);
          }
          CHECK(std::bit_cast<std::uint32_t>(op(x[static_cast<std::size_t>(i)])) == std::bit_cast<std::uint32_t>(got));
        }
        CHECK(in.guards_intact());
        CHECK(out.guards_intact());
      }
}

enum class form { array_array, array_scalar, scalar_array };

template <class Op>
void check_binary(Op op, const binary_ref& ref, float lo, float hi) {
  const float scalar = 0.75f * hi;
  for (form f : {form::array_array, form::array_scalar, form::scalar_array})
    for (std::int64_t n : sizes)
      for (std::size_t offset : {std::size_t{0}, std::size_t{3}})
        for (bool in_place : {false, true}) {
          CAPTURE(static_cast<int>(f));
          CAPTURE(n);
          CAPTURE(offset);
          CAPTURE(in_place);
          const auto a = sample(n, lo, hi, static_cast<unsigned>(n) + 1, float_specials);
          const auto b = sample(n, lo, hi, static_cast<unsigned>(n) + 2, {0.5f, qnan, -2.0f, inf, -0.0f});
          guarded ga(a, offset), gb(b, offset + 1), out(n, offset + 2);
          float* y = !in_place ? out.data() : f == form::scalar_array ? gb.data() : ga.data();
          if (f == form::array_array) k::binary(op, ga.data(), gb.data(), y, n);
          if (f == form::array_scalar) k::binary(op, ga.data(), scalar, y, n);
          if (f == form::scalar_array) k::binary(op, scalar, gb.data(), y, n);
          for (std::int64_t i = 0; i < n; ++i) {
            const auto u = static_cast<std::size_t>(i);
            const float lhs = f == form::scalar_array ? scalar : a[u];
            const float rhs = f == form::array_scalar ? scalar : b[u];
            const float want = static_cast<float>(ref(lhs, rhs));
            if (ulp_distance(y[i], want) > 0) {
              CAPTURE(i);
              CAPTURE(lhs);
              CAPTURE(rhs);
              CHECK(y[i] == want);
            }
          }
          CHECK(ga.guards_intact());
          CHECK(gb.guards_intact());
          CHECK(out.guards_intact());
        }
}

double relu_ref(double x) { return std::isnan(x) ? x : x > 0 ? x : 0.0; }
double nan_aware_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::min(a, b); }
double nan_aware_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b); }

}  // namespace

TEST_CASE("elementwise: operation traits") {
  static_assert(k::is_unary_op_v<k::neg_op> && k::is_unary_op_v<k::relu_op> && k::is_unary_op_v<k::relu6_op>);
  static_assert(k::is_unary_op_v<k::exp_op> && k::is_unary_op_v<k::sigmoid_op> && k::is_unary_op_v<k::tanh_op>);
  static_assert(k::is_binary_op_v<k::add_op> && k::is_binary_op_v<k::sub_op> && k::is_binary_op_v<k::mul_op>);
  static_assert(k::is_binary_op_v<k::div_op> && k::is_binary_op_v<k::minimum_op> && k::is_binary_op_v<k::maximum_op>);
  static_assert(!k::is_unary_op_v<k::add_op> && !k::is_binary_op_v<k::relu_op>);
  static_assert(!k::is_unary_op_v<int> && !k::is_binary_op_v<float>);
  static_assert(std::is_empty_v<k::relu_op> && std::is_empty_v<k::maximum_op>);
}

TEST_CASE("elementwise: unary kernels match std:: math") {
  SUBCASE("neg") { check_unary(k::neg_op{}, [](double x) { return -x; }, -10, 10, 0); }
  SUBCASE("relu") { check_unary(k::relu_op{}, relu_ref, -10, 10, 0); }
  SUBCASE("relu6") {
    check_unary(k::relu6_op{}, [](double x) { return std::isnan(x) ? x : std::min(std::max(x, 0.0), 6.0); }, -10, 10, 0);
  }
  SUBCASE("exp") { check_unary(k::exp_op{}, [](double x) { return std::exp(x); }, -105, 90, 3); }
  SUBCASE("sigmoid") { check_unary(k::sigmoid_op{}, [](double x) { return 1 / (1 + std::exp(-x)); }, -110, 110, 3); }
  SUBCASE("tanh") { check_unary(k::tanh_op{}, [](double x) { return std::tanh(x); }, -12, 12, 2); }
}

TEST_CASE("elementwise: transcendental edge values") {
  // Where xsimd 8.1's exp alone would overflow early or flush subnormals.
  CHECK(ulp_distance(k::exp_op{}(88.5f), static_cast<float>(std::exp(88.5))) <= 3);
  CHECK(ulp_distance(k::exp_op{}(-100.0f), static_cast<float>(std::exp(-100.0))) <= 3);
  CHECK(k::exp_op{}(89.0f) == inf);
  CHECK(k::exp_op{}(-inf) == 0.0f);
  CHECK(k::sigmoid_op{}(-inf) == 0.0f);
  CHECK(k::sigmoid_op{}(inf) == 1.0f);
  CHECK(k::sigmoid_op{}(-1e30f) == 0.0f);
  CHECK(k::sigmoid_op{}(1e30f) == 1.0f);
  CHECK(ulp_distance(k::sigmoid_op{}(-95.0f), static_cast<float>(std::exp(-95.0))) <= 3);
  CHECK(k::tanh_op{}(1e30f) == 1.0f);
  CHECK(k::tanh_op{}(-inf) == -1.0f);
  CHECK(std::isnan(k::sigmoid_op{}(qnan)));
  CHECK(std::isnan(k::tanh_op{}(qnan)));
  CHECK(std::isnan(k::exp_op{}(qnan)));
}

TEST_CASE("elementwise: NaN propagates and -0 clamps to +0, as in PyTorch") {
  CHECK(std::isnan(k::relu_op{}(qnan)));
  CHECK(std::isnan(k::relu6_op{}(qnan)));
  CHECK(std::bit_cast<std::uint32_t>(k::relu_op{}(-0.0f)) == 0u);
  CHECK(std::bit_cast<std::uint32_t>(k::relu6_op{}(-0.0f)) == 0u);
  CHECK(k::relu6_op{}(7.0f) == 6.0f);
  for (float other : {1.0f, -1.0f, inf, -inf}) {
    CHECK(std::isnan(k::maximum_op{}(qnan, other)));
    CHECK(std::isnan(k::maximum_op{}(other, qnan)));
    CHECK(std::isnan(k::minimum_op{}(qnan, other)));
    CHECK(std::isnan(k::minimum_op{}(other, qnan)));
  }
}

TEST_CASE("elementwise: binary kernels match IEEE float arithmetic") {
  // Add, sub, mul and div are exactly rounded in float: compare the float computation bit for bit.
  SUBCASE("add") { check_binary(k::add_op{}, [](double a, double b) { return float(a) + float(b); }, -100, 100); }
  SUBCASE("sub") { check_binary(k::sub_op{}, [](double a, double b) { return float(a) - float(b); }, -100, 100); }
  SUBCASE("mul") { check_binary(k::mul_op{}, [](double a, double b) { return float(a) * float(b); }, -100, 100); }
  SUBCASE("div") { check_binary(k::div_op{}, [](double a, double b) { return float(a) / float(b); }, -100, 100); }
  SUBCASE("minimum") { check_binary(k::minimum_op{}, nan_aware_min, -100, 100); }
  SUBCASE("maximum") { check_binary(k::maximum_op{}, nan_aware_max, -100, 100); }
}

TEST_CASE("elementwise: an element's bits do not depend on its position") {
  // Index 0 is computed in a full vector batch, the last index in the padded tail batch.
  const std::int64_t n = 2 * width + 3;
  const std::vector<float> probes{0.3f, -0.7f, 2.5f, -3.25f, 17.0f, -87.5f, 88.6f, -99.0f, 1e-3f, 5.9f};
  auto x = sample(n, -5, 5, 42);
  std::vector<float> y(static_cast<std::size_t>(n));
  const auto same_bits = [](float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); };
  const auto check_op = [&](auto op) {
    for (float v : probes) {
      x.front() = x.back() = v;
      k::unary(op, x.data(), y.data(), n);
      CAPTURE(v);
      CHECK(same_bits(y.front(), y.back()));
      CHECK(same_bits(y.front(), op(v)));
    }
  };
  check_op(k::neg_op{});
  check_op(k::relu_op{});
  check_op(k::relu6_op{});
  check_op(k::exp_op{});
  check_op(k::sigmoid_op{});
  check_op(k::tanh_op{});
  // A scalar operand and the same value in an array give the same bits, head and tail alike.
  const auto b = sample(n, -5, 5, 43);
  std::vector<float> z(static_cast<std::size_t>(n));
  for (float v : probes) {
    x.front() = x.back() = v;
    k::binary(k::div_op{}, x.data(), b.data(), y.data(), n);
    k::binary(k::div_op{}, v, b.data(), z.data(), n);
    CHECK(same_bits(y.front(), z.front()));
    CHECK(same_bits(y.back(), z.back()));
  }
}

namespace {

// y[index] = op(a[index'], b[index'']) with numpy broadcasting, one multi-index at a time.
template <class Op>
std::vector<float> broadcast_reference(Op op, const std::vector<float>& a, const Shape& sa, const std::vector<float>& b,
                                       const Shape& sb, const Shape& sy) {
  std::vector<float> y(static_cast<std::size_t>(sy.numel()));
  const auto source_index = [&](const Shape& s, const std::vector<std::int64_t>& index) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < s.rank(); ++d) {
      const std::int64_t i = index[sy.rank() - s.rank() + d];
      flat = flat * s[d] + (s[d] == 1 ? 0 : i);
    }
    return static_cast<std::size_t>(flat);
  };
  std::vector<std::int64_t> index(sy.rank(), 0);
  for (auto& out : y) {
    out = op(a[source_index(sa, index)], b[source_index(sb, index)]);
    for (std::size_t d = sy.rank(); d-- > 0;) {
      if (++index[d] < sy[d]) break;
      index[d] = 0;
    }
  }
  return y;
}

void check_broadcast(const Shape& sa, const Shape& sb, const Shape& sy) {
  CAPTURE(sa.to_string());
  CAPTURE(sb.to_string());
  REQUIRE(tracemod::broadcast_shapes(sa, sb, "test") == sy);
  const auto a = sample(sa.numel(), -4, 4, 7);
  const auto b = sample(sb.numel(), -4, 4, 8);
  const auto sub = [](float x, float y) { return x - y; };  // not commutative: operand order matters
  const auto want = broadcast_reference(sub, a, sa, b, sb, sy);

  guarded y(sy.numel(), 1);
  k::binary_broadcast(k::sub_op{}, a.data(), sa, b.data(), sb, y.data(), sy);
  for (std::int64_t i = 0; i < sy.numel(); ++i) {
    CAPTURE(i);
    CHECK(y[i] == want[static_cast<std::size_t>(i)]);
  }
  CHECK(y.guards_intact());

  if (sa == sy) {  // in place: y is a
    auto a_in_place = a;
    k::binary_broadcast(k::sub_op{}, a_in_place.data(), sa, b.data(), sb, a_in_place.data(), sy);
    CHECK(a_in_place == want);
  }
  if (sb == sy) {  // in place: y is b
    auto b_in_place = b;
    k::binary_broadcast(k::sub_op{}, a.data(), sa, b_in_place.data(), sb, b_in_place.data(), sy);
    CHECK(b_in_place == want);
  }
}

}  // namespace

TEST_CASE("elementwise: numpy broadcasting") {
  check_broadcast({3, 1}, {1, 4}, {3, 4});
  check_broadcast({1, 4}, {3, 1}, {3, 4});
  check_broadcast({2, 3, 4}, {4}, {2, 3, 4});
  check_broadcast({2, 3, 4}, {3, 1}, {2, 3, 4});
  check_broadcast({1}, {5, 6}, {5, 6});
  check_broadcast({}, {5}, {5});
  check_broadcast({5}, {}, {5});
  check_broadcast({}, {}, {});
  check_broadcast({2, 3, 5, 7}, {3, 1, 1}, {2, 3, 5, 7});
  check_broadcast({2, 3, 5, 7}, {1, 3, 1, 1}, {2, 3, 5, 7});
  check_broadcast({2, 24, 1, 17}, {24, 9, 17}, {2, 24, 9, 17});
  check_broadcast({4, 1, 3}, {1, 5, 1}, {4, 5, 3});
  check_broadcast({1, 1, 1}, {2, 1, 3}, {2, 1, 3});
  check_broadcast({33, 37}, {33, 37}, {33, 37});
  check_broadcast({2, 1, 1, 1, 1, 1, 1, 3}, {2, 1, 1, 1, 1, 1, 4, 1}, {2, 1, 1, 1, 1, 1, 4, 3});
}

TEST_CASE("elementwise: broadcasting empty tensors") {
  const std::vector<float> none;
  const std::vector<float> three{1, 2, 3};
  float canary = 5.0f;
  k::binary_broadcast(k::add_op{}, none.data(), Shape{0, 3}, three.data(), Shape{3}, &canary, Shape{0, 3});
  k::binary_broadcast(k::add_op{}, three.data(), Shape{3, 1}, none.data(), Shape{3, 0}, &canary, Shape{3, 0});
  k::binary_broadcast(k::add_op{}, none.data(), Shape{0}, three.data(), Shape{1}, &canary, Shape{0});
  CHECK(canary == 5.0f);
  CHECK_THROWS_AS(k::binary_broadcast(k::add_op{}, none.data(), Shape{0}, three.data(), Shape{3}, &canary, Shape{0}),
                  tracemod::shape_error);
}

TEST_CASE("elementwise: shapes that do not broadcast are rejected") {
  const std::vector<float> buf(64, 1.0f);
  std::vector<float> y(64);
  try {
    k::binary_broadcast(k::add_op{}, buf.data(), Shape{2, 3}, buf.data(), Shape{4}, y.data(), Shape{2, 4});
    FAIL("expected shape_error");
  } catch (const tracemod::shape_error& e) {
    const std::string message = e.what();
    CHECK(message.find("add") != std::string::npos);
    CHECK(message.find("(2, 3)") != std::string::npos);
    CHECK(message.find("(4,)") != std::string::npos);
  }
  try {  // broadcastable operands, wrong output shape
    k::binary_broadcast(k::mul_op{}, buf.data(), Shape{2, 3}, buf.data(), Shape{3}, y.data(), Shape{3, 3});
    FAIL("expected shape_error");
  } catch (const tracemod::shape_error& e) {
    const std::string message = e.what();
    CHECK(message.find("mul") != std::string::npos);
    CHECK(message.find("(3, 3)") != std::string::npos);
    CHECK(message.find("(2, 3)") != std::string::npos);
    CHECK(message.find("(3,)") != std::string::npos);
  }
}

}  // namespace tmod_test_kernels_elementwise
