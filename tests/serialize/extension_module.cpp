// A builtin module defined outside the library (here, in this file only, with no library header
// edited) works in every mode: eager, trace_module and printing, the interpreter, save and load in
// the same process (the loader finds it by type name in the registry TM_BUILTIN_MODULE fills).
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>

namespace tmod_test_serialize_extension_module {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

/// min(max(x, lo), hi), as PyTorch's nn.Hardtanh(min_val, max_val).
class ExtensionClamp : public tmod::Module {
 public:
  double lo = -1.0;
  double hi = 1.0;

  ExtensionClamp(double min_val, double max_val) : lo(min_val), hi(max_val) {
    if (!(min_val <= max_val))
      throw tmod::value_error("ExtensionClamp: min_val " + F::repr(min_val) + " exceeds max_val " + F::repr(max_val));
  }

  TM_BUILTIN_MODULE(ExtensionClamp)
  [[nodiscard]] tmod::Value config() const { return tmod::Value::dict({{"min_val", lo}, {"max_val", hi}}); }
  static ExtensionClamp from_config(const tmod::Value& c) {
    return {M::config_field<double>(c, "ExtensionClamp", "min_val"),
            M::config_field<double>(c, "ExtensionClamp", "max_val")};
  }

  [[nodiscard]] tmod::Tensor forward(const tmod::Tensor& x) const {
    return F::minimum(F::maximum(x, static_cast<float>(lo)), static_cast<float>(hi));
  }
  [[nodiscard]] tmod::Shape infer_shape(const tmod::Shape& x) const { return x; }
  [[nodiscard]] std::string extra_repr() const override {
    return "min_val=" + F::repr(lo) + ", max_val=" + F::repr(hi);
  }
};

struct ExtensionNet : tmod::Module {
  M::Conv2d conv{3, 4, 3, {.padding = 1}};
  ExtensionClamp act{-0.5, 0.75};
  TM_MODULE(ExtensionNet, conv, act)
  auto forward(const auto& x) const { return act(conv(x)); }
};

bool same_bits(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("extension module: eager call against a scalar loop") {
  const tmod::Tensor x = tmod::randn({2, 3, 4, 5});
  const tmod::Tensor y = ExtensionClamp(-0.5, 0.75)(x);
  const auto in = x.values<float>(), out = y.values<float>();
  REQUIRE(out.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) CHECK(out[i] == std::min(std::max(in[i], -0.5f), 0.75f));
}

TEST_CASE("extension module: traced as one call, printed, run by the interpreter") {
  ExtensionNet net;
  const tmod::Tensor x = tmod::randn({1, 3, 6, 6});
  tmod::TracedModule traced = tmod::trace_module(net, x);
  CHECK(tmod::graph::to_string(traced.graph()) ==
        "ExtensionNet.Graph (self, x) {\n"
        "\t%2:\tconv = getattr(self, \"conv\") -> (Conv2d)\n"
        "\t%3:\tconv_out = conv(x, )\n"
        "\t%4:\tact = getattr(self, \"act\") -> (ExtensionClamp)\n"
        "\t%5:\tact_out = act(conv_out, )\n"
        "\treturn act_out\n"
        "}");
  CHECK(same_bits(traced(x).tensor(), net(x)));
}

TEST_CASE("extension module: registered by TM_BUILTIN_MODULE, saved and loaded by type name") {
  const M::builtin_entry* entry = M::builtin_registry::instance().find("ExtensionClamp");
  REQUIRE(entry != nullptr);
  ExtensionNet net;
  net.act = ExtensionClamp(-0.25, 2.0);
  const tmod::Tensor x = tmod::randn({1, 3, 6, 6});
  tmod::TracedModule traced = tmod::trace_module(net, x);
  std::stringstream file;
  tmod::save(traced, file);
  const std::string bytes = file.str();
  tmod::TracedModule back = tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
  const auto* act = dynamic_cast<const ExtensionClamp*>(&back.getattr("act").module());
  REQUIRE(act != nullptr);
  CHECK(act->lo == -0.25);
  CHECK(act->hi == 2.0);
  CHECK(same_bits(back(x).tensor(), net(x)));
  CHECK(tmod::graph::to_string(back.graph()) == tmod::graph::to_string(traced.graph()));
}

TEST_CASE("extension module: config round trip and a bad config's error") {
  const M::builtin_entry& entry = *M::builtin_registry::instance().find("ExtensionClamp");
  const tmod::Value config = ExtensionClamp(0.0, 6.0).config();
  CHECK(entry.config(*entry.make(config)) == config);
  CHECK_THROWS_WITH_AS(entry.make(tmod::Value::dict({{"min_val", 0.0}})),
                       "ExtensionClamp: the config has no field 'max_val'", tmod::value_error);
  CHECK_THROWS_WITH_AS(entry.make(tmod::Value::dict({{"min_val", 2.0}, {"max_val", 1.0}})),
                       "ExtensionClamp: min_val 2.0 exceeds max_val 1.0", tmod::value_error);
}

}  // namespace tmod_test_serialize_extension_module
