// Fixtures shared by the runtime-graph tests: the modules of MegEngine's TracedModule documentation
// and tests, written in C++, and helpers that compare tensors exactly.
#pragma once

#include <tracemod/core.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <tuple>

namespace graph_test {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

/// DESIGN.md's SimpleModule.
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

/// A user module that returns its input (flatten removes its calls).
struct IdentityMod : tmod::Module {
  TM_MODULE(IdentityMod)
  auto forward(const auto& x) const { return x; }
};

/// conv -> bn -> relu -> +1 -> identity user module (MegEngine's test block).
struct Block : tmod::Module {
  M::Conv2d conv{3, 3, 3, {.padding = 1}};
  M::BatchNorm2d bn{3};
  IdentityMod id;
  TM_MODULE(Block, conv, bn, id)
  auto forward(const auto& x) const {
    auto y = conv(x);
    auto z = bn(y);
    auto r = F::relu(z);
    auto a = r + 1;
    return id(a);
  }
};

/// Two blocks in a row.
struct Net : tmod::Module {
  Block block0;
  Block block1;
  TM_MODULE(Net, block0, block1)
  auto forward(const auto& x) const {
    auto a = block0(x);
    return block1(a);
  }
};

/// x + 1 + 2 (MegEngine's watch/end point docstring).
struct AddTwice : tmod::Module {
  TM_MODULE(AddTwice)
  auto forward(const auto& x) const {
    auto a = x + 1;
    return a + 2;
  }
};

/// Adds a non-tensor argument: one graph per distinct value.
struct AddK : tmod::Module {
  TM_MODULE(AddK)
  auto forward(const auto& x, int k) const { return x + k; }
};

struct CallsTwice : tmod::Module {
  AddK mod;
  TM_MODULE(CallsTwice, mod)
  auto forward(const auto& x) const {
    auto a = mod(x, 1);
    return mod(a, 2);
  }
};

/// Reassigns and returns a nested structure.
struct TwoOutputs : tmod::Module {
  M::Linear fc{4, 2};
  TM_MODULE(TwoOutputs, fc)
  auto forward(const auto& x) const {
    auto y = fc(x);
    y = F::relu(y);
    y = y * 2.5;
    return std::tuple{y, x};
  }
};

inline tmod::TracedModule& sub(tmod::TracedModule& m, const std::string& path) {
  return m.getattr(path).as<tmod::TracedModule>();
}

/// Bit-for-bit equality of two tensors (shape, dtype and bytes).
inline void check_identical(const tmod::Tensor& a, const tmod::Tensor& b) {
  REQUIRE(a.defined());
  REQUIRE(b.defined());
  REQUIRE(a.shape() == b.shape());
  REQUIRE(a.dtype() == b.dtype());
  CHECK(std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0);
}

inline std::string text(const tmod::graph::Graph& g) { return tmod::graph::to_string(g); }

}  // namespace graph_test
