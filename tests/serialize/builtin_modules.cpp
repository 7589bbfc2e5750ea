// Every builtin module type of the library in every mode save/load has: traced in a graph, run by
// the interpreter, saved, loaded back by type name with the same output bits, its config intact.
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/quant/qconfig.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include "nn/library_builtins.hpp"

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace tmod_test_serialize_builtin_modules {

namespace {

namespace tmod = tracemod;
namespace M = tracemod::nn;

/// A user module calling builtin B on its input (twice over for a binary B).
template <class B, std::size_t Arity>
struct Calls : tmod::Module {
  B m;
  explicit Calls(B module) : m(std::move(module)) {}
  TM_MODULE(Calls, m)
  auto forward(const auto& x) const {
    if constexpr (Arity == 2)
      return m(x, x * 0.5f);
    else
      return m(x);
  }
};

bool same_bits(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

/// Traces a call of `module` on `x` (a (2, 3, 6, 6) input by default), runs it, saves and loads it,
/// and checks the outputs against the eager call and the rebuilt module's config against the original's.
template <std::size_t Arity = 1, class B>
void check_builtin(B module, const tmod::Tensor& x = tmod::randn({2, 3, 6, 6})) {
  Calls<B, Arity> user(std::move(module));
  user.eval();
  const tmod::Tensor eager = user.forward(x);
  tmod::TracedModule traced = tmod::trace_module(user, x);
  CHECK(tmod::graph::to_string(traced.graph()).find(" = m(") != std::string::npos);
  CHECK(same_bits(traced(x).tensor(), eager));
  std::stringstream file;
  tmod::save(traced, file);
  const std::string bytes = file.str();
  tmod::TracedModule back = tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
  const tmod::Module& rebuilt = back.getattr("m").module();
  REQUIRE(dynamic_cast<const B*>(&rebuilt) != nullptr);
  CHECK(dynamic_cast<const B&>(rebuilt).config() == user.m.config());
  CHECK(B::from_config(user.m.config()).config() == user.m.config());
  CHECK(same_bits(back(x).tensor(), eager));
}

/// int32 indices 0, 1, ..., 5 shaped (2, 3): an Embedding's input.
tmod::Tensor indices() {
  tmod::Tensor t = tmod::Tensor::empty({2, 3}, tmod::DType::int32);
  for (std::int32_t i = 0; i < 6; ++i) t.data<std::int32_t>()[i] = i;
  return t;
}

/// One small instance of each builtin module of the library, by type name.
const std::map<std::string, std::function<void()>>& samples() {
  using tmod::functional::pair2;
  static const std::map<std::string, std::function<void()>> s{
      {"Conv2d", [] { check_builtin(M::Conv2d(3, 4, 3, {.stride = 2, .padding = 1})); }},
      {"BatchNorm2d", [] { check_builtin(M::BatchNorm2d(3)); }},
      {"LayerNorm", [] {
         check_builtin(M::LayerNorm({6, 6}));
         check_builtin(M::LayerNorm({6}, 1e-3, false));
       }},
      {"GroupNorm", [] { check_builtin(M::GroupNorm(3, 3, 1e-3)); }},
      {"Linear", [] { check_builtin(M::Linear(6, 5)); }},  // on the last axis of the 4-D input
      {"ReLU", [] { check_builtin(M::ReLU()); }},
      {"ReLU6", [] { check_builtin(M::ReLU6()); }},
      {"SiLU", [] { check_builtin(M::SiLU()); }},
      {"Hardswish", [] { check_builtin(M::Hardswish()); }},
      {"Hardsigmoid", [] { check_builtin(M::Hardsigmoid()); }},
      {"GELU", [] {
         check_builtin(M::GELU());
         check_builtin(M::GELU("tanh"));
       }},
      {"LeakyReLU", [] { check_builtin(M::LeakyReLU(0.2)); }},
      {"Identity", [] { check_builtin(M::Identity()); }},
      {"MaxPool2d", [] { check_builtin(M::MaxPool2d(3, {.stride = 2, .padding = 1})); }},
      {"AvgPool2d", [] { check_builtin(M::AvgPool2d(2, {.ceil_mode = true})); }},
      {"AdaptiveAvgPool2d", [] { check_builtin(M::AdaptiveAvgPool2d(pair2{2, 3})); }},
      {"Flatten", [] { check_builtin(M::Flatten(1, 2)); }},
      {"Upsample", [] {
         check_builtin(M::Upsample({.scale_factor = 1.5}));
         check_builtin(M::Upsample(pair2{4, 9}, "bilinear", true));
       }},
      {"Elemwise", [] { check_builtin<2>(M::Elemwise("FUSE_ADD_RELU")); }},
      {"Dropout", [] { check_builtin(M::Dropout(0.5)); }},
      {"ChannelShuffle", [] { check_builtin(M::ChannelShuffle(3)); }},
      {"Embedding", [] { check_builtin(M::Embedding(6, 4, 2), indices()); }},
      {"ConvBn2d", [] { check_builtin(M::ConvBn2d(3, 4, 1)); }},
      {"FakeQuantize", [] { check_builtin(tracemod::quant::min_max_fakequant_qconfig.activation()); }},
      {"ConvBnRelu2d", [] { check_builtin(M::ConvBnRelu2d(3, 6, 3, {.padding = 1, .groups = 3})); }},
  };
  return s;
}

}  // namespace

TEST_CASE("builtin modules: every registered type traces, runs, saves and loads with the same output") {
  const std::set<std::string> library = library_builtins::declared_in_headers();
  std::size_t checked = 0;
  for (const std::string& type : M::builtin_registry::instance().type_names()) {
    if (!library.contains(type)) continue;  // a module a test defines is checked by its own test
    CAPTURE(type);
    const auto sample = samples().find(type);
    REQUIRE_MESSAGE(sample != samples().end(), "this test has no sample instance of the builtin module");
    sample->second();
    ++checked;
  }
  CHECK(checked == library.size());
}

}  // namespace tmod_test_serialize_builtin_modules
