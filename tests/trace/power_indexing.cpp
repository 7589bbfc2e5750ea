// pow, square, rsqrt, astype and getitem while tracing: the typed graph (static shapes, compile-time
// queries, fused evaluation against eager mode) and trace_module (the printed graph with MegEngine's
// names, the interpreter against eager mode).
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

namespace tmod_test_trace_power_indexing {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const auto x = a.dtype() == tmod::DType::float32 ? std::bit_cast<std::uint32_t>(a.data<float>()[i])
                                                     : static_cast<std::uint32_t>(a.data<std::int32_t>()[i]);
    const auto y = b.dtype() == tmod::DType::float32 ? std::bit_cast<std::uint32_t>(b.data<float>()[i])
                                                     : static_cast<std::uint32_t>(b.data<std::int32_t>()[i]);
    if (x != y) return false;
  }
  return true;
}

/// No product feeds an addition, so no evaluation may contract one into an FMA: every mode gives
/// the same bits.
const auto powers = [](const auto& x, const auto& y) {
  return F::rsqrt(F::square(x + 1.f)) / F::pow(y, 2) + F::method_pow(x, y) - F::method_rpow(x, 2.f);
};

struct Powers : tmod::Module {
  TM_MODULE(Powers)
  auto forward(const auto& x, const auto& y) const { return powers(x, y); }
};

/// x[:, 1:3] cast to int32 and x[..., -1] with a reversed step: indexing and astype in one forward.
struct Slicer : tmod::Module {
  TM_MODULE(Slicer)
  auto forward(const auto& x) const {
    const auto a = F::astype(F::getitem(x, tmod::all, tmod::slice(1, 3)), tmod::int32);
    const auto b = F::getitem(x, tmod::ellipsis, tmod::slice(tmod::none, tmod::none, -2), -1);
    return std::make_tuple(a, F::relu(b));
  }
};

const Tensor x = tmod::uniform({3, 37}, 0.1f, 3.f, 11);
const Tensor y = tmod::uniform({37}, 0.5f, 2.f, 12);
const Tensor cube = tmod::uniform({2, 4, 5}, -9.f, 9.f, 13);

}  // namespace

TEST_CASE("typed graph: the power ops have static shapes, are found by type, and evaluate fused as eager mode") {
  const auto g = tmod::symbolic_trace(powers, tmod::spec<3, 37>(), tmod::spec<37>());
  static_assert(tmod::count_ops<F::pow_fn>(g) == 1);
  static_assert(tmod::count_ops<F::square_fn>(g) == 1);
  static_assert(tmod::count_ops<F::rsqrt_fn>(g) == 1);
  static_assert(tmod::count_ops<F::method_pow_fn>(g) == 1);
  static_assert(tmod::count_ops<F::method_rpow_fn>(g) == 1);
  static_assert(tmod::has_static_output_shape(g));
  static_assert(tmod::static_output_shape(g) == Shape{3, 37});
  CHECK(same_bits(g(x, y), powers(x, y)));
  // and against the scalar formula
  const Tensor out = g(x, y);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 37; ++j) {
      const float a = x.at({i, j}), b = y.at({j});
      const float expected = 1.f / std::sqrt((a + 1.f) * (a + 1.f)) / std::pow(b, 2.f) + std::pow(a, b) - std::pow(2.f, a);
      CHECK(out.at({i, j}) == expected);
    }
}

TEST_CASE("typed graph: getitem and astype record their params and evaluate as eager mode") {
  const auto f = [](const auto& v) { return Slicer{}.forward(v); };
  const auto g = tmod::symbolic_trace([](const auto& v) { return std::get<1>(Slicer{}.forward(v)); }, tmod::spec({2, 4, 5}));
  static_assert(tmod::count_ops<F::getitem_fn>(g) == 1);
  const Tensor expected = std::get<1>(f(cube));
  REQUIRE(expected.shape() == Shape{2, 2});
  CHECK(expected.at({1, 1}) == std::max(cube.at({1, 1, 4}), 0.f));
  CHECK(same_bits(g(cube), expected));
  const auto h = tmod::symbolic_trace([](const auto& v) { return F::astype(F::getitem(v, 0), tmod::int32); },
                                      tmod::spec({2, 4, 5}));
  static_assert(tmod::count_ops<F::astype_fn>(h) == 1);
  static_assert(!tmod::has_static_output_shape(h));  // getitem's shape depends on its index
  const auto k = tmod::symbolic_trace([](const auto& v) { return F::astype(F::square(v), tmod::int32); }, tmod::spec<2, 4, 5>());
  static_assert(tmod::static_output_shape(k) == Shape{2, 4, 5});  // astype's does not depend on its dtype
  CHECK(same_bits(k(cube), F::astype(F::square(cube), tmod::int32)));
  CHECK(same_bits(h(cube), F::astype(F::getitem(cube, 0), tmod::int32)));
}

TEST_CASE("trace_module: the power ops print with MegEngine's names, and the interpreter equals eager mode") {
  Powers net;
  const tmod::TracedModule m = tmod::trace_module(net, x, y);
  std::ostringstream os;
  os << m.graph();
  const std::string text = os.str();
  CAPTURE(text);
  // (Inputs past the first are x_1, ...; C++ leaves the order of an expression's operands open, so the numbered names may differ.)
  CHECK(text.find("square_out = elemwise.square(add_out") != std::string::npos);
  CHECK(text.find("rsqrt_out = elemwise.rsqrt(square_out, )") != std::string::npos);
  CHECK(text.find(" = elemwise.pow(x_1, 2, )") != std::string::npos);
  CHECK(text.find(" = x.__pow__(x_1, )") != std::string::npos);
  CHECK(text.find("rpow_out = x.__rpow__(2.0, )") != std::string::npos);
  CHECK(same_bits(m(x, y).tensor(), net.forward(x, y)));
}

TEST_CASE("trace_module: getitem prints its index as MegEngine does, astype its dtype; the interpreter equals eager mode") {
  Slicer net;
  const tmod::TracedModule m = tmod::trace_module(net, cube);
  std::ostringstream os;
  os << m.graph();
  const std::string text = os.str();
  CAPTURE(text);
  CHECK(text.find("getitem_out = x.__getitem__((slice(None, None, None), slice(1, 3, None)), )") != std::string::npos);
  CHECK(text.find("astype_out = getitem_out.astype(int32, )") != std::string::npos);
  CHECK(text.find("getitem_out_1 = x.__getitem__((Ellipsis, slice(None, None, -2), -1), )") != std::string::npos);
  const tmod::Value got = m(cube);
  const auto [a, b] = net.forward(cube);
  REQUIRE(got.size() == 2);
  CHECK(got[0].tensor().dtype() == tmod::DType::int32);
  CHECK(same_bits(got[0].tensor(), a));
  CHECK(same_bits(got[1].tensor(), b));
  // the graph's nodes know the dtype astype gives
  const auto* node = m.graph().outputs()[0];
  CHECK(static_cast<const tmod::graph::TensorNode*>(node)->dtype() == tmod::DType::int32);
}

struct BadIndex : tmod::Module {
  TM_MODULE(BadIndex)
  auto forward(const auto& v) const { return F::getitem(v, tmod::all, 7); }
};

TEST_CASE("trace_module: a bad index is a shape_error naming __getitem__ and the shape, while tracing") {
  BadIndex net;
  try {
    (void)tmod::trace_module(net, cube);
    FAIL("no error");
  } catch (const tmod::shape_error& e) {
    const std::string what = e.what();
    CHECK(what.find("__getitem__") != std::string::npos);
    CHECK(what.find("(2, 4, 5)") != std::string::npos);
  }
  CHECK_THROWS_AS(tmod::symbolic_trace([](const auto& v) { return F::getitem(v, 0, 0, 0, 0); }, tmod::spec({2, 4, 5})),
                  tmod::shape_error);
}

}  // namespace tmod_test_trace_power_indexing
