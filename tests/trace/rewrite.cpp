// tmod::simplify: each rule proved by static_assert on the rewritten graph's type (node count, op
// counts) and by value (the simplified graph computes what the original does: exactly where the
// folded scalars are exact, within rounding where folding reassociates).
#include <golden.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/trace.hpp>

#include <boost/hana/equal.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <doctest/doctest.h>

#include "trace/trace_test.hpp"

#include <string>
#include <tuple>
#include <type_traits>

namespace tmod_test_trace_rewrite {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace hana = boost::hana;

using trace_test::ops;

/// The simplified graph evaluates like the original, up to `tol` (0: exactly).
template <class G, class S>
void check_same_values(const G& g, const S& s, double tol, const std::string& what) {
  for (const std::int64_t n : {1, 17, 1000}) {
    const tmod::Tensor x = tmod::uniform({n}, -4.f, 4.f, static_cast<std::uint64_t>(n));
    golden::check_close(s(x), g(x), tol, tol, what);
  }
}

/// Rounding of reassociated scalar arithmetic on values of magnitude <= ~30.
constexpr double reassociation_tol = 1e-6;

}  // namespace

TEST_CASE("simplify: (x * 2) * 3 -> x * 6") {
  const auto g = tmod::symbolic_trace([](const auto& x) { return (x * 2.f) * 3.f; }, tmod::spec({5}));
  const auto s = tmod::simplify(g);
  static_assert(tmod::node_count(g) == 3 && tmod::node_count(s) == 2);
  static_assert(tmod::count_ops<F::method_mul_fn>(g) == 2 && tmod::count_ops<F::method_mul_fn>(s) == 1);
  CHECK(std::get<1>(s.output().args).value == 6.f);
  CHECK(s.output().id == g.output().id);  // the folded call keeps the outer call's id
  check_same_values(g, s, 0.0, "(x * 2) * 3");  // x * 2 is exact, so both round once
}

TEST_CASE("simplify: scale chains with the scalar on either side and F::mul") {
  const auto f = [](const auto& x) { return F::mul(1.5f, 2.f * F::mul(x, 0.3f)) * 1.1f; };
  const auto g = tmod::symbolic_trace(f, tmod::spec({5}));
  const auto s = tmod::simplify(g);
  static_assert(tmod::ops_of(g) == ops<F::mul_fn, F::method_rmul_fn, F::mul_fn, F::method_mul_fn>);
  static_assert(tmod::ops_of(s) == ops<F::method_mul_fn>);
  static_assert(tmod::node_count(g) == 5 && tmod::node_count(s) == 2);
  CHECK(std::get<1>(s.output().args).value == doctest::Approx(0.3f * 2.f * 1.5f * 1.1f).epsilon(1e-6));
  check_same_values(g, s, reassociation_tol, "scale chain");
}

TEST_CASE("simplify: 3 + (x - 1) -> x + 2, and longer shift chains") {
  const auto g = tmod::symbolic_trace([](const auto& x) { return 3.f + (x - 1.f); }, tmod::spec({5}));
  const auto s = tmod::simplify(g);
  static_assert(tmod::ops_of(g) == ops<F::method_sub_fn, F::method_radd_fn>);
  static_assert(tmod::ops_of(s) == ops<F::method_add_fn>);
  static_assert(tmod::node_count(g) == 3 && tmod::node_count(s) == 2);
  CHECK(std::get<1>(s.output().args).value == 2.f);
  check_same_values(g, s, reassociation_tol, "3 + (x - 1)");

  const auto f = [](const auto& x) { return F::add(F::sub(x * 2.f * 3.f + 1.f, 0.5f), 2); };
  const auto g2 = tmod::symbolic_trace(f, tmod::spec({5}));
  const auto s2 = tmod::simplify(g2);
  // x * 6 + 2.5: the scale chain and the shift chain fold separately.
  static_assert(tmod::node_count(g2) == 6 && tmod::node_count(s2) == 3);
  static_assert(tmod::ops_of(s2) == ops<F::method_mul_fn, F::method_add_fn>);
  CHECK(std::get<1>(s2.output().args).value == 2.5f);
  check_same_values(g2, s2, reassociation_tol, "x * 2 * 3 + 1 - 0.5 + 2");
}

TEST_CASE("simplify: x * c<1>, x / c<1>, x + c<0>, x - c<0> vanish; run-time ones stay") {
  const auto g = tmod::symbolic_trace(
      [](const auto& x) { return F::relu((tmod::c<1> * x + tmod::c<0>) / tmod::c<1> - tmod::c<0>); },
      tmod::spec({5}));
  const auto s = tmod::simplify(g);
  static_assert(tmod::node_count(g) == 6 && tmod::node_count(s) == 2);
  static_assert(tmod::ops_of(s) == ops<F::relu_fn>);
  check_same_values(g, s, 0.0, "identities");

  const auto whole = tmod::simplify(tmod::symbolic_trace([](const auto& x) { return x * tmod::c<1>; }, tmod::spec({3})));
  static_assert(tmod::node_count(whole) == 1);  // the graph is its input
  const tmod::Tensor x = tmod::randn({3}, 1);
  CHECK(whole(x).shares_storage_with(x));

  // Plain numbers are run-time values: their type cannot show that they are 1 or 0.
  const auto runtime = tmod::simplify(tmod::symbolic_trace([](const auto& x) { return x * 1.f + 0.f; }, tmod::spec({3})));
  static_assert(tmod::node_count(runtime) == 3);
  // A compile-time constant that is not an identity stays too.
  const auto kept = tmod::simplify(tmod::symbolic_trace([](const auto& x) { return x * tmod::c<2>; }, tmod::spec({3})));
  static_assert(tmod::node_count(kept) == 2);
}

TEST_CASE("simplify: compile-time constant chains fold to compile-time constants") {
  const auto g = tmod::symbolic_trace([](const auto& x) { return x * tmod::c<2> * tmod::c<1, 2>; }, tmod::spec({4}));
  const auto s = tmod::simplify(g);
  static_assert(tmod::node_count(g) == 3 && tmod::node_count(s) == 1);  // x * c<1> vanishes as well
  check_same_values(g, s, 0.0, "x * c<2> * c<0.5>");

  const auto g2 = tmod::symbolic_trace(
      [](const auto& x) { return F::exp((x + tmod::c<3, 2>) - tmod::c<1, 2> - tmod::c<1>); }, tmod::spec({4}));
  const auto s2 = tmod::simplify(g2);
  static_assert(tmod::node_count(g2) == 5 && tmod::node_count(s2) == 2);
  static_assert(tmod::ops_of(s2) == ops<F::exp_fn>);

  const auto g3 = tmod::symbolic_trace([](const auto& x) { return x * tmod::c<2> * tmod::c<3>; }, tmod::spec({4}));
  const auto s3 = tmod::simplify(g3);
  using folded = std::tuple_element_t<1, std::remove_cvref_t<decltype(s3.output().args)>>;
  static_assert(std::same_as<folded, tmod::constant_scalar_t<6>>);
  check_same_values(g3, s3, 0.0, "x * c<2> * c<3>");
}

TEST_CASE("simplify: relu(relu(x)) -> relu(x)") {
  const auto g = tmod::symbolic_trace([](const auto& x) { return F::relu(F::relu(F::relu(x))); }, tmod::spec({5}));
  const auto s = tmod::simplify(g);
  static_assert(tmod::count_ops<F::relu_fn>(g) == 3 && tmod::count_ops<F::relu_fn>(s) == 1);
  static_assert(tmod::node_count(s) == 2);
  check_same_values(g, s, 0.0, "relu(relu(relu(x)))");

  // relu of something else, or another op over relu, stays.
  const auto other = tmod::simplify(tmod::symbolic_trace([](const auto& x) { return F::relu6(F::relu(x)); }, tmod::spec({5})));
  static_assert(tmod::node_count(other) == 3);
}

TEST_CASE("simplify: what no rule matches stays") {
  const auto f = [](const auto& x) { return (x / 2.f) * 3.f - (2.f - x) * 0.f; };
  const auto g = tmod::symbolic_trace(f, tmod::spec({5}));
  const auto s = tmod::simplify(g);
  // x / 2 then * 3 is not a scale chain; 2 - x is not a shift of x; * 0 is not an identity.
  static_assert(std::same_as<decltype(g), decltype(s)>);
}

TEST_CASE("simplify: rules apply under heavy ops, in every output, and keep shared values") {
  const auto f = [](const auto& x, const auto& w) {
    const auto y = x * 2.f;
    const auto m = F::matmul(F::relu(F::relu(y * 3.f)), w);
    return std::tuple{F::softmax(m + tmod::c<0>, {.axis = 1}), y + 1.f + 1.f};
  };
  const auto g = tmod::symbolic_trace(f, tmod::spec({4, 4}), tmod::spec({4, 4}));
  const auto s = tmod::simplify(g);
  static_assert(tmod::ops_of(g) == ops<F::method_mul_fn, F::method_mul_fn, F::relu_fn, F::relu_fn, F::matmul_fn,
                                       F::method_add_fn, F::softmax_fn, F::method_mul_fn, F::method_add_fn,
                                       F::method_add_fn>);
  static_assert(tmod::ops_of(s) ==
                ops<F::method_mul_fn, F::relu_fn, F::matmul_fn, F::softmax_fn, F::method_mul_fn, F::method_add_fn>);
  static_assert(tmod::node_count(g) == 13 && tmod::node_count(s) == 9);
  const tmod::Tensor x = tmod::randn({4, 4}, 2), w = tmod::randn({4, 4}, 3);
  const auto [a, b] = g(x, w);
  const auto [sa, sb] = s(x, w);
  golden::check_close(sa, a, 0.0, 0.0, "softmax output");  // x * 2 * 3 == x * 6: x * 2 is exact
  golden::check_close(sb, b, reassociation_tol, reassociation_tol, "shift output");
}

}  // namespace tmod_test_trace_rewrite
