// pow, square, rsqrt, astype and getitem through FuseElemwise and save -> load: the elementwise ones
// fuse into one elemwise.fused program, and every op loads with its params and runs as before.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace tmod_test_serialize_power_indexing {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Tensor;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const void* pa = a.dtype() == tmod::DType::int32 ? static_cast<const void*>(a.data<std::int32_t>()) : a.data<float>();
  const void* pb = b.dtype() == tmod::DType::int32 ? static_cast<const void*>(b.data<std::int32_t>()) : b.data<float>();
  return std::memcmp(pa, pb, a.nbytes()) == 0;
}

tmod::TracedModule round_trip(const tmod::TracedModule& m) {
  std::ostringstream os;
  tmod::save(m, os);
  const std::string bytes = os.str();
  return tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

std::vector<std::string> calls(const tmod::graph::Graph& g) {
  std::vector<std::string> v;
  for (const tmod::graph::Expr* e : g.exprs())
    if (e->is_call()) v.push_back(e->target());
  return v;
}

/// An elementwise chain of the power ops (no product feeds an addition, so fused and unfused
/// evaluation give the same bits), then indexing and a cast.
struct Net : tmod::Module {
  TM_MODULE(Net)
  auto forward(const auto& x) const {
    const auto p = F::rsqrt(F::square(F::pow(x, 3) + 2.f)) * F::method_pow(x, 0.5f);
    const auto s = F::getitem(p, tmod::slice(tmod::none, tmod::none, -1), tmod::ellipsis, tmod::slice(1, -1));
    return std::make_tuple(s, F::astype(s * 100.f, tmod::int32));
  }
};

const Tensor input = tmod::uniform({3, 2, 37}, 0.f, 3.f, 21);

}  // namespace

TEST_CASE("FuseElemwise: pow with a scalar exponent, square and rsqrt fuse into one program with the same bits") {
  Net net;
  const tmod::TracedModule m = tmod::trace_module(net, input);
  const tmod::TracedModule opt = tmod::optimize(m, {"FuseElemwise"});
  const std::vector<std::string> targets = calls(opt.graph());
  CAPTURE(opt.graph());
  REQUIRE(targets.size() == 4);
  CHECK(targets[0] == "elemwise.fused");
  CHECK(targets[1] == "__getitem__");
  std::ostringstream os;
  os << opt.graph();
  CHECK(os.str().find("elemwise.fused[rsqrt(square(pow(x0, 3.0) + 2.0)) * pow(x0, 0.5)](x, )") != std::string::npos);
  const auto [s, i] = net.forward(input);
  const tmod::Value got = opt(input);
  CHECK(same_bits(got[0].tensor(), s));
  CHECK(same_bits(got[1].tensor(), i));
}

TEST_CASE("save/load: pow, square, rsqrt, getitem and astype load with their params and run as before") {
  Net net;
  const tmod::TracedModule m = tmod::trace_module(net, input);
  const auto [s, i] = net.forward(input);
  for (const tmod::TracedModule& loaded : {round_trip(m), round_trip(tmod::optimize(m, {"FuseElemwise"}))}) {
    std::ostringstream os;
    os << loaded.graph();
    CAPTURE(os.str());
    CHECK(os.str().find(".__getitem__((slice(None, None, -1), Ellipsis, slice(1, -1, None)), )") != std::string::npos);
    CHECK(os.str().find(".astype(int32, )") != std::string::npos);
    const tmod::Value got = loaded(input);
    CHECK(same_bits(got[0].tensor(), s));
    CHECK(same_bits(got[1].tensor(), i));
  }
  std::ostringstream original;
  original << m.graph();
  std::ostringstream reloaded;
  reloaded << round_trip(m).graph();
  CHECK(original.str() == reloaded.str());
}

}  // namespace tmod_test_serialize_power_indexing
