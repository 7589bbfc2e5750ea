// An elementwise op defined in this file only, with no library header edited: softsign(x) =
// x / (1 + |x|), its SIMD kernel written here. Registered beside its definition, it works in every
// mode a builtin op does: eager, typed graphs (queries and fused evaluation), trace_module and
// printing, the interpreter, FuseElemwise (inside one elemwise.fused program) and save -> load.
#include "passes/passes_test.hpp"

#include <tracemod/trace.hpp>

#include <cmath>
#include <span>
#include <sstream>
#include <string>
#include <string_view>

namespace tmod_test_passes_extension_op {

namespace {

using namespace passes_test;

/// x / (1 + |x|) on one vector; one lane runs the same vector code, so every element has its bits.
struct softsign_kernel {
  static constexpr std::string_view name = "softsign";
  tmod::kernels::fbatch operator()(const tmod::kernels::fbatch& x) const noexcept {
    return x / (tmod::kernels::fbatch(1.0f) + xsimd::abs(x));
  }
  float operator()(float x) const noexcept { return (*this)(tmod::kernels::fbatch(x)).get(0); }
};

struct softsign_fn : F::unary_op<softsign_fn, softsign_kernel> {
  static constexpr std::string_view name = "softsign";
  static constexpr std::string_view target = "nn.softsign";
  static constexpr F::call_kind kind = F::call_kind::function;
};
inline constexpr softsign_fn softsign{};
TRACEMOD_REGISTER_OP(softsign_fn);

/// softsign(x + 1) * 2: no product feeds an addition, so no evaluation may contract one into an FMA
/// and every mode must give the same bits.
struct SoftsignNet : tmod::Module {
  TM_MODULE(SoftsignNet)
  auto forward(const auto& x) const { return softsign(x + 1.f) * 2.f; }
};

/// The scalar formula, element by element.
tmod::Tensor reference(const tmod::Tensor& x) {
  tmod::Tensor y = tmod::zeros(x.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float a = x.data<float>()[i] + 1.f;
    y.data<float>()[i] = a / (1.f + std::fabs(a)) * 2.f;
  }
  return y;
}

bool same_bits(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() && std::equal(a.data<float>(), a.data<float>() + a.numel(), b.data<float>());
}

tmod::TracedModule round_trip(const tmod::TracedModule& m) {
  std::ostringstream os;
  tmod::save(m, os);
  const std::string bytes = os.str();
  return tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

const tmod::Tensor input = tmod::uniform({2, 3, 37}, -6.f, 6.f, 35);

}  // namespace

TEST_CASE("extension op: registered from its definition, with the facts its kernel gives") {
  const F::op_entry& e = F::entry_of<softsign_fn>();
  CHECK(e.target == "nn.softsign");
  CHECK(e.name == "softsign");
  CHECK(e.elementwise);
  REQUIRE(e.fused_function);
  const F::fused_function& f = F::fused_functions::instance().at(*e.fused_function);
  CHECK(f.name == "softsign");
  CHECK(f.arity == 1);
  CHECK_THROWS_AS(F::register_op<softsign_fn>(), tmod::value_error);  // its target is taken
}

TEST_CASE("extension op: eager mode equals the scalar formula") {
  const tmod::Tensor y = softsign(input);
  REQUIRE(y.shape() == input.shape());
  for (std::int64_t i = 0; i < input.numel(); ++i) {
    const float x = input.data<float>()[i];
    CHECK(y.data<float>()[i] == x / (1.f + std::fabs(x)));
  }
  CHECK(same_bits(SoftsignNet{}.forward(input), reference(input)));
}

TEST_CASE("extension op: typed graph query and fused evaluation") {
  const auto f = [](const auto& x) { return softsign(x + 1.f) * 2.f; };
  const auto g = tmod::symbolic_trace(f, tmod::spec({2, 3, 37}));
  static_assert(tmod::count_ops<softsign_fn>(g) == 1);
  static_assert(tmod::count_ops<F::relu_fn>(g) == 0);
  CHECK(same_bits(g(input), f(input)));
}

TEST_CASE("extension op: trace_module prints it, the interpreter runs it, FuseElemwise fuses it, save/load keeps it") {
  SoftsignNet net;
  tmod::TracedModule m = tmod::trace_module(net, input);
  std::ostringstream os;
  os << m.graph();
  CAPTURE(os.str());
  CHECK(os.str().find("softsign_out = nn.softsign(add_out, )") != std::string::npos);
  CHECK(same_bits(m(input).tensor(), net.forward(input)));

  tmod::TracedModule opt = tmod::optimize(m, {"FuseElemwise"});
  CHECK(join(calls(opt.graph())) == "elemwise.fused");
  std::ostringstream fused;
  fused << opt.graph();
  CAPTURE(fused.str());
  CHECK(fused.str().find("mul_out = elemwise.fused[softsign(x0 + 1.0) * 2.0](x, )") != std::string::npos);
  CHECK(same_bits(opt(input).tensor(), net.forward(input)));

  CHECK(same_bits(round_trip(m)(input).tensor(), net.forward(input)));
  CHECK(same_bits(round_trip(opt)(input).tensor(), net.forward(input)));
}

}  // namespace tmod_test_passes_extension_op
