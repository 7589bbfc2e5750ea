// Run-time errors of the compile-time tracer: shape errors found while tracing with dynamic specs,
// inputs that contradict a static spec, misuse of a typed graph's call, symbolic tensors outside a trace.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/trace.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace tmod_test_trace_errors {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;

/// The message of the exception E that `f` throws ("" if it throws nothing; another type escapes).
template <class E, class Fn>
std::string message_of(Fn&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("errors: a dynamic-spec shape error at trace time names the op and the shapes") {
  const auto add = [](const auto& x, const auto& y) { return x + y; };
  const std::string m =
      message_of<tmod::shape_error>([&] { (void)tmod::symbolic_trace(add, tmod::spec({2, 3}), tmod::spec({4})); });
  CHECK(contains(m, "__add__"));
  CHECK(contains(m, "(2, 3)"));
  CHECK(contains(m, "(4,)"));

  const auto mixed = [](const auto& x, const auto& y) { return F::maximum(x, y); };
  CHECK_THROWS_AS((void)tmod::symbolic_trace(mixed, tmod::spec<2, 3>(), tmod::spec({4})), tmod::shape_error);

  const auto conv = [](const auto& x, const auto& w) { return F::conv2d(x, w); };
  const std::string c = message_of<tmod::shape_error>(
      [&] { (void)tmod::symbolic_trace(conv, tmod::spec({1, 3, 8, 8}), tmod::spec({4, 2, 3, 3})); });
  CHECK(contains(c, "nn.conv2d"));
  CHECK(contains(c, "(1, 3, 8, 8)"));

  const auto lin = [](const auto& x, const auto& w) { return F::relu(F::linear(x, w)); };
  const std::string l =
      message_of<tmod::shape_error>([&] { (void)tmod::symbolic_trace(lin, tmod::spec({2, 5}), tmod::spec({3, 4})); });
  CHECK(contains(l, "nn.linear"));

  const auto reshape = [](const auto& x) { return F::reshape(x, {4, 4}); };
  CHECK(contains(message_of<tmod::shape_error>([&] { (void)tmod::symbolic_trace(reshape, tmod::spec({3, 5})); }),
                 "tensor.reshape"));
}

TEST_CASE("errors: a static-spec input fed another shape") {
  const auto g = tmod::symbolic_trace([](const auto& x, const auto& y) { return x * y; }, tmod::spec<2, 3>(),
                                      tmod::spec({3}));
  const std::string m = message_of<tmod::shape_error>([&] { (void)g(tmod::ones({3, 2}), tmod::ones({3})); });
  CHECK(contains(m, "input 0"));
  CHECK(contains(m, "(3, 2)"));
  CHECK(contains(m, "(2, 3)"));
  CHECK_THROWS_AS((void)g(tmod::ones({2, 3, 1}), tmod::ones({3})), tmod::shape_error);
  CHECK(g(tmod::ones({2, 3}), tmod::ones({3})).shape() == tmod::Shape{2, 3});
}

TEST_CASE("errors: a dynamic-spec input fed another shape just evaluates, or the op throws") {
  const auto f = [](const auto& x, const auto& b) { return F::relu(x * 2.f + b); };
  const auto g = tmod::symbolic_trace(f, tmod::spec({2, 3}), tmod::spec({3}));
  // The spec's shape only served tracing: another broadcastable shape evaluates.
  const tmod::Tensor x = tmod::randn({4, 5, 3}, 1), b = tmod::randn({3}, 2);
  CHECK(g(x, b).shape() == tmod::Shape{4, 5, 3});
  const tmod::Tensor y = g(tmod::ones({7}), tmod::ones({1}));
  CHECK(y.shape() == tmod::Shape{7});
  CHECK(y.data<float>()[6] == 3.f);
  CHECK_THROWS_AS((void)g(tmod::ones({2, 3}), tmod::ones({4})), tmod::shape_error);

  const auto conv = tmod::symbolic_trace([](const auto& x, const auto& w) { return F::conv2d(x, w); },
                                         tmod::spec({1, 3, 8, 8}), tmod::spec({4, 3, 3, 3}));
  CHECK(conv(tmod::ones({2, 3, 5, 5}), tmod::ones({4, 3, 3, 3})).shape() == tmod::Shape{2, 4, 3, 3});
  const std::string m =
      message_of<tmod::shape_error>([&] { (void)conv(tmod::ones({1, 2, 8, 8}), tmod::ones({4, 3, 3, 3})); });
  CHECK(contains(m, "nn.conv2d"));
}

TEST_CASE("errors: calling a typed graph with bad tensors") {
  const auto g = tmod::symbolic_trace([](const auto& x) { return F::exp(x) - 1.f; }, tmod::spec({3}));
  CHECK_THROWS_AS((void)g(tmod::Tensor{}), tmod::value_error);
  CHECK_THROWS_AS((void)g(tmod::ones({3}, tmod::DType::int32)), tmod::dtype_error);
  const std::vector<tmod::Tensor> none;
  CHECK_THROWS_AS((void)g.run(none), tmod::graph_error);
  const std::vector<tmod::Tensor> two{tmod::ones({3}), tmod::ones({3})};
  CHECK_THROWS_AS((void)g.run(two), tmod::graph_error);
}

TEST_CASE("errors: specs and symbolic tensors outside a trace") {
  CHECK_THROWS_AS((void)tmod::spec({3}, tmod::DType::int32), tmod::dtype_error);
  const auto g = tmod::symbolic_trace([](const auto& x) { return F::relu(x); }, tmod::spec({3}));
  const auto& x = std::get<0>(g.inputs());
  const std::string m = message_of<tmod::graph_error>([&] { (void)F::sigmoid(x); });
  CHECK(contains(m, "symbolic_trace"));
  CHECK_THROWS_AS((void)(x + 1.f), tmod::graph_error);
}

}  // namespace tmod_test_trace_errors
