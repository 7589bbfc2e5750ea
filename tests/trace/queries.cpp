// Compile-time queries on typed graphs traced from lambdas: node_count, ops_of, count_ops,
// contains_op, static_output_shape, has_static_output_shape, submodules_of. Every expectation is
// derived by hand from the lambda; each is checked by static_assert and again at run time.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/trace.hpp>

#include <boost/hana/equal.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <doctest/doctest.h>

#include "trace/trace_test.hpp"

namespace tmod_test_trace_queries {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace hana = boost::hana;

using trace_test::ops;

}  // namespace

TEST_CASE("queries: a scalar affine chain under relu") {
  const auto f = [](const auto& x) { return F::relu(x * 2.f + 1.f); };
  const auto g = tmod::symbolic_trace(f, tmod::spec({3, 4}));
  // x, x.__mul__(2), .__add__(1), relu: scalars are const values of their call, not nodes.
  static_assert(tmod::node_count(g) == 4);
  static_assert(tmod::ops_of(g) == ops<F::method_mul_fn, F::method_add_fn, F::relu_fn>);
  static_assert(tmod::count_ops<F::relu_fn>(g) == 1);
  static_assert(tmod::count_ops<F::method_mul_fn>(g) == 1);
  static_assert(tmod::count_ops<F::mul_fn>(g) == 0);  // x * 2 is the method, not elemwise.mul
  static_assert(tmod::contains_op<F::method_add_fn>(g));
  static_assert(!tmod::contains_op<F::conv2d_fn>(g));
  static_assert(!tmod::has_static_output_shape(g));
  static_assert(hana::length(tmod::submodules_of(g)) == hana::size_c<0>);
  CHECK(tmod::node_count(g) == 4);
  CHECK(tmod::count_ops<F::relu_fn>(g) == 1);
  CHECK(tmod::count_ops<F::method_add_fn>(g) == 1);
  CHECK_FALSE(tmod::contains_op<F::conv2d_fn>(g));
  CHECK(g.call_count() == 3);
}

TEST_CASE("queries: scalars on the left record the reflected methods") {
  const auto f = [](const auto& x) { return 3.f - 2.f * (1.f + x) / 4.f; };
  const auto g = tmod::symbolic_trace(f, tmod::spec({5}));
  // 1 + x -> __radd__, 2 * (.) -> __rmul__, (.) / 4 -> __truediv__, 3 - (.) -> __rsub__.
  static_assert(tmod::ops_of(g) ==
                ops<F::method_radd_fn, F::method_rmul_fn, F::method_truediv_fn, F::method_rsub_fn>);
  static_assert(tmod::node_count(g) == 5);
  CHECK(tmod::node_count(g) == 5);
  CHECK(tmod::count_ops<F::method_rsub_fn>(g) == 1);
  CHECK(tmod::count_ops<F::method_sub_fn>(g) == 0);
}

TEST_CASE("queries: two inputs, operands listed left to right before their call") {
  const auto f = [](const auto& x, const auto& y) { return F::maximum(F::exp(x), -y) - F::sigmoid(x * y); };
  const auto g = tmod::symbolic_trace(f, tmod::spec({2, 3}), tmod::spec({2, 3}));
  // Post-order: exp(x), -y, maximum, x * y, sigmoid, __sub__.
  static_assert(tmod::ops_of(g) == ops<F::exp_fn, F::method_neg_fn, F::maximum_fn, F::method_mul_fn, F::sigmoid_fn,
                                       F::method_sub_fn>);
  // Calls: 6. Input uses: x (exp), y (neg), x and y (mul) = 4.
  static_assert(tmod::node_count(g) == 10);
  CHECK(tmod::node_count(g) == 10);
  CHECK(tmod::count_ops<F::maximum_fn>(g) == 1);
  CHECK(tmod::count_ops<F::minimum_fn>(g) == 0);
  CHECK(g.call_count() == 6);
}

TEST_CASE("queries: a shared intermediate counts once per use, but is one call") {
  const auto f = [](const auto& x) {
    const auto r = F::relu(x);
    return r * r;
  };
  const auto g = tmod::symbolic_trace(f, tmod::spec({4}));
  // The typed graph is a tree: r appears under both operands of the product. Ids (run time) tell
  // the two uses apart from two separate relu calls; the type cannot.
  static_assert(tmod::count_ops<F::relu_fn>(g) == 2);
  static_assert(tmod::node_count(g) == 5);  // mul, relu, x, relu, x
  CHECK(tmod::count_ops<F::relu_fn>(g) == 2);
  CHECK(g.call_count() == 2);  // relu and mul were recorded once each
  const auto& [left, right] = g.output().args;
  CHECK(left.id == right.id);
  CHECK(left.id != g.output().id);
}

TEST_CASE("queries: heavy ops and functional elementwise forms") {
  const auto f = [](const auto& x, const auto& w, const auto& b) {
    const auto c = F::conv2d(x, w, b, {.padding = 1});
    const auto p = F::max_pool2d(F::relu(c), 2);
    return F::softmax(F::flatten(F::add(p, 1.f), {.start_axis = 1}), {.axis = 1});
  };
  const auto g = tmod::symbolic_trace(f, tmod::spec({1, 3, 8, 8}), tmod::spec({4, 3, 3, 3}), tmod::spec({4}));
  static_assert(tmod::ops_of(g) ==
                ops<F::conv2d_fn, F::relu_fn, F::max_pool2d_fn, F::add_fn, F::flatten_fn, F::softmax_fn>);
  static_assert(tmod::node_count(g) == 9);  // 6 calls + x, w, b
  static_assert(tmod::count_ops<F::add_fn>(g) == 1 && tmod::count_ops<F::method_add_fn>(g) == 0);
  CHECK(tmod::node_count(g) == 9);
  CHECK(tmod::contains_op<F::max_pool2d_fn>(g));
  CHECK_FALSE(tmod::contains_op<F::avg_pool2d_fn>(g));
  CHECK(g.output().shape == tmod::Shape{1, 64});
}

TEST_CASE("queries: concat of a tuple and constants") {
  const tmod::Tensor bias = tmod::ones({2, 1});
  const auto f = [&bias](const auto& x, const auto& y) {
    return F::concat(std::tuple{x + bias, F::tanh(y)}, {.axis = 1});
  };
  const auto g = tmod::symbolic_trace(f, tmod::spec({2, 3}), tmod::spec({2, 5}));
  // x, bias (Constant), __add__, y, tanh, concat.
  static_assert(tmod::ops_of(g) == ops<F::method_add_fn, F::tanh_fn, F::concat_fn>);
  static_assert(tmod::node_count(g) == 6);
  CHECK(tmod::node_count(g) == 6);
  CHECK(g.output().shape == tmod::Shape{2, 8});
}

TEST_CASE("queries: multiple outputs") {
  const auto f = [](const auto& x, const auto& y) { return std::tuple{F::relu(x), x * y, F::exp(y)}; };
  const auto g = tmod::symbolic_trace(f, tmod::spec({3}), tmod::spec({3}));
  static_assert(decltype(g)::multiple_outputs);
  // Outputs in order: relu(x), x * y, exp(y).
  static_assert(tmod::ops_of(g) == ops<F::relu_fn, F::method_mul_fn, F::exp_fn>);
  static_assert(tmod::node_count(g) == 7);  // 3 calls + x, x, y, y
  static_assert(!tmod::has_static_output_shape(g));
  CHECK(tmod::node_count(g) == 7);
  CHECK(tmod::count_ops<F::exp_fn>(g) == 1);
}

TEST_CASE("queries: static output shapes through elementwise ops and linear") {
  const auto bcast = tmod::symbolic_trace([](const auto& x, const auto& y) { return F::relu(x * y + 1.f); },
                                          tmod::spec<2, 1, 4>(), tmod::spec<3, 1>());
  static_assert(tmod::has_static_output_shape(bcast));
  static_assert(tmod::static_output_shape(bcast) == tmod::Shape{2, 3, 4});
  CHECK(tmod::static_output_shape(bcast) == tmod::Shape{2, 3, 4});
  CHECK(bcast.output().shape == tmod::Shape{2, 3, 4});

  const auto lin = tmod::symbolic_trace([](const auto& x, const auto& w, const auto& b) { return F::linear(x, w, b); },
                                        tmod::spec<5, 4>(), tmod::spec<3, 4>(), tmod::spec<3>());
  static_assert(tmod::static_output_shape(lin) == tmod::Shape{5, 3});

  const auto rank0 = tmod::symbolic_trace([](const auto& x) { return F::neg(x) * 2.f; }, tmod::spec<>());
  static_assert(tmod::static_output_shape(rank0) == tmod::Shape{});
  static_assert(tmod::static_output_shape(rank0).rank() == 0);

  // One dynamic operand, or an op with params (conv, pooling, reshape...), makes the shape dynamic.
  const auto mixed = tmod::symbolic_trace([](const auto& x, const auto& y) { return x + y; }, tmod::spec<2, 3>(),
                                          tmod::spec({3}));
  static_assert(!tmod::has_static_output_shape(mixed));
  const auto flat = tmod::symbolic_trace([](const auto& x) { return F::flatten(x); }, tmod::spec<2, 3>());
  static_assert(!tmod::has_static_output_shape(flat));
  CHECK(flat.output().shape == tmod::Shape{6});
  CHECK_FALSE(tmod::has_static_output_shape(mixed));
}

TEST_CASE("queries: the graph type records the inputs in order") {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& y) { return y - x; }, tmod::spec<2>(),
                                      tmod::spec({2}, tmod::DType::float32, "y"));
  using G = decltype(g);
  static_assert(G::input_count == 2);
  using X = std::tuple_element_t<0, G::input_types>;
  using Y = std::tuple_element_t<1, G::input_types>;
  static_assert(X::index == 0 && tmod::trace::has_static_shape_v<X>);
  static_assert(Y::index == 1 && !tmod::trace::has_static_shape_v<Y>);
  CHECK(std::get<1>(g.inputs()).name == "y");
  CHECK(std::get<0>(g.inputs()).shape == tmod::Shape{2});
}

}  // namespace tmod_test_trace_queries
