// Positional params (F::conv2d(x, w, b, 2, 1), F::max_pool2d(x, 3, 2, 1), F::flatten(x, 1)): for
// every op the positional form gives bit-for-bit the result of the designated-initialiser form (or,
// for ops whose params are all required, of the op's eager definition called with the params
// struct); shapes are checked against hand-derived ones, so a positional value that was dropped
// fails; the forms an op does not have reach the one catch-all (its static_assert is in
// tests/compile_fail/functional_positional_*).
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>

#include <doctest/doctest.h>

#include <array>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace tmod_test_functional_positional {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

/// Same shape and the same bits in every element.
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  return std::memcmp(a.data<float>(), b.data<float>(), static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0;
}

/// A call form the op does not have resolves to the catch-all (whose body is the static_assert).
template <class Op, class... A>
inline constexpr bool rejected_v = std::same_as<std::invoke_result_t<const Op&, A...>, F::detail::no_call_form>;

/// (operands, operands without a default, positional params, positional params without a default)
template <class Op>
constexpr std::array<std::size_t, 4> call_shape() {
  constexpr auto s = F::detail::call_shape_v<Op>;
  return {s.operands, s.required_operands, s.positional, s.required_positional};
}
using counts = std::array<std::size_t, 4>;

// PyTorch's / MegEngine's signatures: conv2d(input, weight, bias=None, stride=1, padding=0,
// dilation=1, groups=1), max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1,
// ceil_mode=False), batch_norm(inp, running_mean=None, ..., *, training, momentum, eps), ...
static_assert(call_shape<F::conv2d_fn>() == counts{3, 2, 4, 0});
static_assert(call_shape<F::linear_fn>() == counts{3, 2, 0, 0});
static_assert(call_shape<F::matmul_fn>() == counts{2, 2, 2, 0});
static_assert(call_shape<F::batch_norm_fn>() == counts{5, 1, 0, 0});
static_assert(call_shape<F::max_pool2d_fn>() == counts{1, 1, 5, 1});
static_assert(call_shape<F::avg_pool2d_fn>() == counts{1, 1, 5, 1});
static_assert(call_shape<F::adaptive_avg_pool2d_fn>() == counts{1, 1, 1, 1});
static_assert(call_shape<F::softmax_fn>() == counts{1, 1, 1, 0});
static_assert(call_shape<F::flatten_fn>() == counts{1, 1, 2, 0});
static_assert(call_shape<F::reshape_fn>() == counts{1, 1, 1, 1});
static_assert(call_shape<F::transpose_fn>() == counts{1, 1, 1, 1});
static_assert(call_shape<F::concat_fn>() == counts{1, 1, 1, 0});
static_assert(call_shape<F::relu_fn>() == counts{1, 1, 0, 0});
static_assert(call_shape<F::add_fn>() == counts{2, 2, 0, 0});
static_assert(call_shape<F::method_add_fn>() == counts{2, 2, 0, 0});
static_assert(call_shape<F::method_neg_fn>() == counts{1, 1, 0, 0});

TEST_CASE("positional: conv2d fills inp, weight, bias, then stride, padding, dilation, groups") {
  const Tensor x = tmod::randn({2, 3, 9, 9}, 1), w = tmod::randn({4, 3, 3, 3}, 2), b = tmod::randn({4}, 3);
  const Tensor y = F::conv2d(x, w, b, 2, 1);
  CHECK(y.shape() == Shape{2, 4, 5, 5});  // (9 + 2*1 - 3) / 2 + 1
  CHECK(same_bits(y, F::conv2d(x, w, b, {.stride = 2, .padding = 1})));
  CHECK(same_bits(F::conv2d(x, w, b, 2), F::conv2d(x, w, b, {.stride = 2})));

  const Tensor z = F::conv2d(x, w, b, {2, 1}, {1, 0}, 1, 1);
  CHECK(z.shape() == Shape{2, 4, 5, 7});  // h: (9 + 2 - 3) / 2 + 1, w: (9 - 3) / 1 + 1
  CHECK(same_bits(z, F::conv2d(x, w, b, {.stride = {2, 1}, .padding = {1, 0}, .dilation = 1, .groups = 1})));

  // No bias: tmod::none holds the bias's place when params follow.
  const Tensor n = F::conv2d(x, w, tmod::none, 2);
  CHECK(n.shape() == Shape{2, 4, 4, 4});
  CHECK(same_bits(n, F::conv2d(x, w, {.stride = 2})));

  const Tensor xg = tmod::randn({2, 4, 9, 9}, 4), wg = tmod::randn({4, 2, 3, 3}, 5);
  const Tensor g = F::conv2d(xg, wg, b, 1, 0, 2, 2);
  CHECK(g.shape() == Shape{2, 4, 5, 5});  // 9 - 2*(3-1)
  CHECK(same_bits(g, F::conv2d(xg, wg, b, {.dilation = 2, .groups = 2})));
  // Positional params, then the params struct for the rest.
  CHECK(same_bits(F::conv2d(xg, wg, b, 1, {.dilation = 2, .groups = 2}), g));
  // A positional value overrides the struct's field it stands for.
  CHECK(same_bits(F::conv2d(x, w, b, 2, F::conv2d_params{.stride = 3, .padding = 1}), y));
}

TEST_CASE("positional: the pooling ops take kernel_size first, then the rest in PyTorch's order") {
  const Tensor x = tmod::randn({2, 3, 9, 9}, 6);
  const Tensor m = F::max_pool2d(x, 3, 2, 1);
  CHECK(m.shape() == Shape{2, 3, 5, 5});
  CHECK(same_bits(m, F::max_pool2d(x, 3, {.stride = 2, .padding = 1})));
  const Tensor md = F::max_pool2d(x, {3, 2}, tmod::none, 0, {1, 2}, true);
  CHECK(md.shape() == Shape{2, 3, 3, 4});  // h: ceil((9 - 3) / 3) + 1; w: dilated kernel 3, stride 2: ceil((9 - 3) / 2) + 1
  CHECK(same_bits(md, F::max_pool2d(x, {3, 2}, {.dilation = {1, 2}, .ceil_mode = true})));
  CHECK(same_bits(F::max_pool2d(x, 2, std::optional<F::pair2>{3}), F::max_pool2d(x, 2, {.stride = 3})));

  const Tensor a = F::avg_pool2d(x, 2, 2, 0, false, false);
  CHECK(a.shape() == Shape{2, 3, 4, 4});
  CHECK(same_bits(a, F::avg_pool2d(x, 2, {.stride = 2, .padding = 0, .ceil_mode = false, .count_include_pad = false})));
  // count_include_pad (the last positional param) changes the border averages.
  const Tensor ap = F::avg_pool2d(x, 3, 2, 1, true, false);
  CHECK(same_bits(ap, F::avg_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false})));
  CHECK_FALSE(same_bits(ap, F::avg_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true})));

  const Tensor ad = F::adaptive_avg_pool2d(x, 7);
  CHECK(ad.shape() == Shape{2, 3, 7, 7});
  CHECK(same_bits(ad, F::adaptive_avg_pool2d(x, {7, 7})));
  CHECK(same_bits(ad, F::adaptive_avg_pool2d_fn::eager({.oshp = 7}, x)));
  CHECK(F::adaptive_avg_pool2d(x, {7, 5}).shape() == Shape{2, 3, 7, 5});
}

TEST_CASE("positional: softmax, flatten, reshape, transpose, concat, matmul") {
  const Tensor x = tmod::randn({2, 3, 4, 5}, 7);
  CHECK(same_bits(F::softmax(x, 1), F::softmax(x, {.axis = 1})));
  CHECK(same_bits(F::softmax(x, -1), F::softmax(x, {.axis = -1})));
  CHECK_FALSE(same_bits(F::softmax(x, 0), F::softmax(x)));  // the default axis of a 4-D input is 1
  CHECK(same_bits(F::softmax(x, tmod::none), F::softmax(x)));
  CHECK(same_bits(F::softmax(x, std::nullopt), F::softmax(x)));
  CHECK(same_bits(F::softmax(x, std::optional<std::int64_t>{2}), F::softmax(x, {.axis = 2})));

  CHECK(F::flatten(x, 1).shape() == Shape{2, 60});
  CHECK(same_bits(F::flatten(x, 1), F::flatten(x, {.start_axis = 1})));
  CHECK(same_bits(F::flatten(x, 1, -1), F::flatten(x, {.start_axis = 1, .end_axis = -1})));
  CHECK(F::flatten(x, 1, 2).shape() == Shape{2, 12, 5});
  CHECK(same_bits(F::flatten(x, 1, 2), F::flatten(x, {.start_axis = 1, .end_axis = 2})));
  CHECK(F::flatten(x, std::size_t{2}).shape() == Shape{2, 3, 20});  // any integer type

  const Tensor r = F::reshape(x, {2, -1});
  CHECK(r.shape() == Shape{2, 60});
  CHECK(same_bits(r, F::reshape_fn::eager({.target_shape = {2, -1}}, x)));
  const F::int_list shape{6, 20};
  CHECK(F::reshape(x, shape).shape() == Shape{6, 20});

  const Tensor t3 = tmod::randn({2, 3, 4}, 8);
  const Tensor t = F::transpose(t3, {0, 2, 1});
  CHECK(t.shape() == Shape{2, 4, 3});
  CHECK(same_bits(t, F::transpose_fn::eager({.pattern = {0, 2, 1}}, t3)));

  const Tensor a = tmod::randn({2, 3}, 9), b = tmod::randn({2, 5}, 10);
  const std::vector<Tensor> list{a, b};
  const Tensor c = F::concat(list, 1);
  CHECK(c.shape() == Shape{2, 8});
  CHECK(same_bits(c, F::concat(list, {.axis = 1})));
  CHECK(same_bits(F::concat({a, b}, 1), c));
  CHECK(same_bits(F::concat(std::tuple{a, b}, -1), c));

  const Tensor p = tmod::randn({3, 4}, 11), q = tmod::randn({5, 4}, 12), s = tmod::randn({3, 5}, 13);
  const Tensor pq = F::matmul(p, q, false, true);
  CHECK(pq.shape() == Shape{3, 5});
  CHECK(same_bits(pq, F::matmul(p, q, {.transpose_b = true})));
  CHECK(F::matmul(s, p, true).shape() == Shape{5, 4});
  CHECK(same_bits(F::matmul(s, p, true), F::matmul(s, p, {.transpose_a = true})));
}

TEST_CASE("positional: ops without positional params keep their operand forms") {
  const Tensor x = tmod::randn({3, 4}, 14), w = tmod::randn({5, 4}, 15), b = tmod::randn({5}, 16);
  CHECK(same_bits(F::linear(x, w), F::linear(x, w, tmod::none)));
  CHECK(F::linear(x, w, b).shape() == Shape{3, 5});
  CHECK(same_bits(F::relu(x), F::relu_fn::eager({}, x)));
  CHECK(same_bits(F::add(x, 2.f), F::add_fn::eager({}, x, 2.f)));
  CHECK(same_bits(F::sub(2.f, x), -(x - 2.f)));

  // Any extra argument is no call form of these ops.
  static_assert(rejected_v<F::relu_fn, Tensor, int>);
  static_assert(rejected_v<F::add_fn, Tensor, Tensor, int>);
  static_assert(rejected_v<F::method_add_fn, Tensor, Tensor, int>);
  static_assert(rejected_v<F::linear_fn, Tensor, Tensor, Tensor, int>);
  // batch_norm's training, momentum and eps are keyword-only: never positional.
  static_assert(!std::invocable<const F::batch_norm_fn&, Tensor, Tensor, Tensor, Tensor, Tensor, bool>);
  static_assert(std::invocable<const F::batch_norm_fn&, Tensor, Tensor, Tensor, Tensor, Tensor, F::batch_norm_params>);
}

TEST_CASE("positional: counts and orders that no call form takes") {
  static_assert(rejected_v<F::flatten_fn, Tensor, int, int, int>);           // flatten has 2 positional params
  static_assert(rejected_v<F::max_pool2d_fn, Tensor>);                       // kernel_size is required
  static_assert(rejected_v<F::conv2d_fn, Tensor>);                           // weight is required
  static_assert(rejected_v<F::conv2d_fn, Tensor, Tensor, Tensor, int, int, int, int, int>);
  static_assert(std::invocable<const F::max_pool2d_fn&, Tensor, int, F::max_pool2d_params>);
}

TEST_CASE("positional: a value that does not fit the param's type is a value_error naming the op and param") {
  const Tensor x = tmod::randn({2, 3}, 17);
  const auto huge = std::numeric_limits<std::uint64_t>::max();
  std::string message;
  try {
    (void)F::flatten(x, huge);
  } catch (const tmod::value_error& e) {
    message = e.what();
  }
  CHECK(message.find("tensor.flatten") != std::string::npos);
  CHECK(message.find("start_axis") != std::string::npos);
  CHECK(message.find("18446744073709551615") != std::string::npos);
  CHECK_THROWS_AS((void)F::max_pool2d(tmod::randn({1, 1, 4, 4}, 18), 2, std::uint64_t{1} << 63), tmod::value_error);
}

}  // namespace

// The mechanism is the op's definition only: an op declared here, with a double, an int64 and a bool
// param, gets the same call forms. (A named namespace: clang flags the unused static members of a
// class in an anonymous one.)
namespace positional_test {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Tensor;

struct scaled_params {
  double factor = 1.0;
  std::int64_t offset = 0;
  bool negate = false;
};
struct scaled_fn : F::op_base<scaled_fn> {
  static constexpr std::string_view name = "scaled";
  static constexpr std::string_view target = "test.scaled";
  static constexpr F::call_kind kind = F::call_kind::function;
  static constexpr std::array operands{F::operand{"inp", F::operand_kind::tensor}};
  using params = scaled_params;
  static constexpr std::tuple fields{F::positional("factor", &params::factor), F::positional("offset", &params::offset),
                                     F::keyword("negate", &params::negate)};
  static Tensor eager(const params& p, const Tensor& x) {
    const Tensor y = F::add(F::mul(x, static_cast<float>(p.factor)), static_cast<float>(p.offset));
    return p.negate ? F::neg(y) : y;
  }
};
inline constexpr scaled_fn scaled{};

}  // namespace positional_test

namespace {

using positional_test::scaled;
using positional_test::scaled_fn;

TEST_CASE("positional: an op's definition alone gives it the call forms") {
  const Tensor x = tmod::arange(0, 4);
  CHECK(same_bits(scaled(x, 2), scaled(x, {.factor = 2.0})));  // an integer for a double
  CHECK(same_bits(scaled(x, 0.5f, 3), scaled(x, {.factor = 0.5, .offset = 3})));
  CHECK(same_bits(scaled(x, 0.5, {.negate = true}), scaled(x, {.factor = 0.5, .negate = true})));
  CHECK(scaled(x, 2, 1).at({3}) == 7.f);  // 3 * 2 + 1, by hand
  static_assert(rejected_v<scaled_fn, Tensor, double, int, bool>);  // negate is keyword-only
}

}  // namespace

}  // namespace tmod_test_functional_positional
