// The small backbone both re-tracing suites trace, wrap in a new net and trace again
// (tests/graph/retrace.cpp: graphs and errors; tests/serialize/retrace.cpp: after save and load).
#pragma once

#include <tracemod/nn.hpp>

namespace retrace_models {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

/// conv -> bn -> relu: a user module inside the backbone.
struct Stem : tmod::Module {
  M::Conv2d conv{3, 4, 3, {.padding = 1}};
  M::BatchNorm2d bn{4};
  TM_MODULE(Stem, conv, bn)
  auto forward(const auto& x) const { return F::relu(bn(conv(x))); }
};

/// The backbone that is traced first: a nested user module, a builtin and a residual add.
struct Backbone : tmod::Module {
  Stem stem;
  M::Conv2d conv{4, 4, 1};
  TM_MODULE(Backbone, stem, conv)
  auto forward(const auto& x) const {
    auto y = stem(x);
    return conv(y) + y;
  }
};

}  // namespace retrace_models
