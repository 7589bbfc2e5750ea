// The main demo: eager ops, a module, its compile-time typed graph, queries, rewrites and fused
// evaluation, checked against eager mode.
#include <tracemod/tracemod.hpp>

#include <boost/hana/for_each.hpp>

#include <chrono>
#include <cstdio>
#include <string>

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

struct SimpleModule : tmod::Module {
  M::Linear linear{4, 5};
  tmod::Parameter param{tmod::tensor({1.f})};
  TM_MODULE(SimpleModule, linear, param)

  auto forward(const auto& x) const {
    auto a = x + tmod::constant({1.f});
    auto r = F::relu(a);
    return linear(r + param);
  }
};

namespace {

float max_abs_diff(const tmod::Tensor& a, const tmod::Tensor& b) {
  float m = 0.f;
  for (std::int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.data<float>()[i] - b.data<float>()[i]));
  return m;
}

template <class Fn>
double best_ms(Fn&& fn, int reps = 5) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main() {
  std::printf("tracemod %s\n\n", TRACEMOD_VERSION_STRING);

  // 1. Eager mode: functional ops and a module run their SIMD kernels immediately.
  tmod::manual_seed(0);
  SimpleModule m;
  const tmod::Tensor x = tmod::randn({3, 4}, 42);
  const tmod::Tensor y = m(x);
  std::printf("eager:  SimpleModule(x%s) -> %s\n", x.shape().to_string().c_str(), y.shape().to_string().c_str());
  for (const auto& [name, t] : m.named_parameters())
    std::printf("        parameter %-14s %s\n", name.c_str(), t.shape().to_string().c_str());

  // 2. The compile-time tracer: the graph is the type of g.
  auto g = tmod::symbolic_trace(m, tmod::spec({3, 4}));
  static_assert(tmod::count_ops<F::relu_fn>(g) == 1);
  static_assert(tmod::count_ops<M::Linear>(g) == 1);
  std::printf("\ntraced: %zu nodes; calls in execution order:", tmod::node_count(g));
  boost::hana::for_each(tmod::ops_of(g), [](auto op) {
    using T = typename decltype(op)::type;
    if constexpr (requires { T::target; })
      std::printf(" %s", std::string(T::target).c_str());
    else
      std::printf(" %s", std::string(T::tracemod_type_name).c_str());
  });
  const tmod::Tensor y2 = g(x);
  std::printf("\n        fused evaluation vs eager: max |diff| = %g\n", max_abs_diff(y, y2));

  // 3. Compile-time rewrites: scalar chains fold, identities vanish.
  auto chain = [](const auto& v) { return F::relu(F::relu(3.f + ((v * 2.f) * 0.5f - 1.f) * tmod::c<1>)); };
  auto raw = tmod::symbolic_trace(chain, tmod::spec<1024>());
  auto simple = tmod::simplify(raw);
  static_assert(tmod::node_count(simple) < tmod::node_count(raw));
  static_assert(tmod::static_output_shape(simple) == tmod::Shape{1024});
  const tmod::Tensor v = tmod::randn({1024}, 7);
  std::printf("\nsimplify: %zu -> %zu nodes, max |diff| vs eager = %g\n", tmod::node_count(raw),
              tmod::node_count(simple), max_abs_diff(chain(v), simple(v)));

  // 4. Fused evaluation: one SIMD pass instead of one pass (and one temporary) per op.
  auto act = [](const auto& t) { return F::relu(t * 0.5f + 1.f) * 2.f - 3.f; };
  auto fused = tmod::symbolic_trace(act, tmod::spec({1 << 22}));
  const tmod::Tensor big = tmod::randn({1 << 22}, 1);
  tmod::Tensor out;
  const double eager_ms = best_ms([&] { out = act(big); });
  const double fused_ms = best_ms([&] { out = fused(big); });
  std::printf("\nrelu(x * 0.5 + 1) * 2 - 3 on 4M floats: eager %.2f ms, fused %.2f ms (%.1fx)\n", eager_ms, fused_ms,
              eager_ms / fused_ms);
  return max_abs_diff(y, y2) == 0.f ? 0 : 1;
}
