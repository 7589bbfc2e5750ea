// Positional params while tracing: a lambda written with positional params records the same typed
// graph (same node types, same params) as the designated-initialiser spelling, and evaluates to
// the eager result bit for bit.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/trace.hpp>

#include <doctest/doctest.h>

#include <concepts>
#include <cstring>
#include <tuple>

namespace tmod_test_trace_positional {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Tensor;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data<float>(), b.data<float>(), static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0;
}

/// The params of a node as a graph prints them.
template <class Node>
std::string params_of(const Node& n) {
  return F::params_repr<typename Node::op>(n.params);
}

TEST_CASE("positional trace: conv2d, max_pool2d, flatten, softmax record the designated form's params") {
  const auto positional = [](const auto& x, const auto& w, const auto& b) {
    return F::softmax(F::flatten(F::max_pool2d(F::conv2d(x, w, b, 2, 1), 3, 2, 1), 1), 1);
  };
  const auto designated = [](const auto& x, const auto& w, const auto& b) {
    const auto c = F::conv2d(x, w, b, {.stride = 2, .padding = 1});
    return F::softmax(F::flatten(F::max_pool2d(c, 3, {.stride = 2, .padding = 1}), {.start_axis = 1}), {.axis = 1});
  };
  const auto specs = std::tuple{tmod::spec({2, 3, 9, 9}), tmod::spec({4, 3, 3, 3}), tmod::spec({4})};
  const auto g = std::apply([&](const auto&... s) { return tmod::symbolic_trace(positional, s...); }, specs);
  const auto h = std::apply([&](const auto&... s) { return tmod::symbolic_trace(designated, s...); }, specs);
  static_assert(std::same_as<decltype(g), decltype(h)>);

  const auto& softmax = g.output();
  const auto& flatten = std::get<0>(softmax.args);
  const auto& pool = std::get<0>(flatten.args);
  const auto& conv = std::get<0>(pool.args);
  CHECK(params_of(softmax) == "axis=1");
  CHECK(params_of(flatten) == "start_axis=1, end_axis=-1");
  CHECK(params_of(pool) == "kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(1, 1), ceil_mode=False");
  CHECK(params_of(conv) == "stride=(2, 2), padding=(1, 1), dilation=(1, 1), groups=1");
  CHECK(params_of(softmax) == params_of(h.output()));
  CHECK(params_of(conv) == params_of(std::get<0>(std::get<0>(std::get<0>(h.output().args).args).args)));
  CHECK(softmax.shape == tmod::Shape{2, 36});  // conv (2, 4, 5, 5), pool (2, 4, 3, 3)

  const Tensor x = tmod::randn({2, 3, 9, 9}, 1), w = tmod::randn({4, 3, 3, 3}, 2), b = tmod::randn({4}, 3);
  const Tensor y = g(x, w, b);
  CHECK(same_bits(y, positional(x, w, b)));
  CHECK(same_bits(y, h(x, w, b)));
}

TEST_CASE("positional trace: concat of a tuple, reshape, transpose, matmul, pooling, no bias") {
  const auto f = [](const auto& a, const auto& b) {
    const auto r = F::reshape(F::concat(std::tuple{a, b}, 1), {2, 2, 4});
    return F::matmul(F::transpose(r, {0, 2, 1}), r, true, true);  // (2, 2, 4) @ (2, 4, 2)
  };
  const auto g = tmod::symbolic_trace(f, tmod::spec({2, 3}), tmod::spec({2, 5}));
  const auto& mm = g.output();
  CHECK(params_of(mm) == "transpose_a=True, transpose_b=True");
  CHECK(params_of(std::get<0>(mm.args)) == "pattern=(0, 2, 1)");
  CHECK(params_of(std::get<1>(mm.args)) == "target_shape=(2, 2, 4)");
  CHECK(params_of(std::get<0>(std::get<1>(mm.args).args)) == "axis=1");
  CHECK(mm.shape == tmod::Shape{2, 2, 2});
  const Tensor a = tmod::randn({2, 3}, 4), b = tmod::randn({2, 5}, 5);
  CHECK(same_bits(g(a, b), f(a, b)));

  const auto p = [](const auto& x, const auto& w) {
    return F::adaptive_avg_pool2d(F::avg_pool2d(F::conv2d(x, w, tmod::none, 1, 1), 2, 2, 0, false, false), {3, 2});
  };
  const auto gp = tmod::symbolic_trace(p, tmod::spec({1, 2, 8, 8}), tmod::spec({3, 2, 3, 3}));
  const auto& avg = std::get<0>(gp.output().args);
  CHECK(params_of(gp.output()) == "oshp=(3, 2)");
  CHECK(params_of(avg) == "kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=False, count_include_pad=False");
  CHECK(params_of(std::get<0>(avg.args)) == "stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1");
  static_assert(std::same_as<std::tuple_element_t<2, std::remove_cvref_t<decltype(std::get<0>(avg.args).args)>>, tmod::none_t>);
  const Tensor x = tmod::randn({1, 2, 8, 8}, 6), w = tmod::randn({3, 2, 3, 3}, 7);
  CHECK(same_bits(gp(x, w), p(x, w)));
}

}  // namespace

}  // namespace tmod_test_trace_positional
