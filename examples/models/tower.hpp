// A tower of residual blocks held in a tmod::nn::ModuleList: the forward loops over the list and
// reassigns its variables (`y = block(y)`, `y = F::relu(y)`), as PyTorch code usually does.
//
// tmod::trace_module traces it (a Sym stays a Sym through the loop) and so does eager mode; the
// compile-time tracer cannot: in a typed graph every op returns a new type, so `y = block(y)` does not
// compile, and a loop over a run-time sized list has no single type to give `y`. ResNet (resnet.hpp)
// is written in single-assignment style for that reason.
#pragma once

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/module_list.hpp>
#include <tracemod/nn/parameter.hpp>
#include <tracemod/nn/reflection.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace models {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

/// y = fc(x) * gain + x.
struct TowerBlock : tmod::Module {
  M::Linear fc;
  tmod::Parameter gain;

  explicit TowerBlock(std::int64_t width) : fc(width, width), gain(tmod::full({width}, 0.5f)) {}

  TM_MODULE(TowerBlock, fc, gain)

  auto forward(const auto& x) const {
    auto y = fc(x);
    y = y * gain;
    return y + x;
  }
};

/// stem, then `depth` blocks each followed by a relu, then head.
struct Tower : tmod::Module {
  M::Linear stem;
  M::ModuleList<TowerBlock> blocks;
  M::Linear head;

  Tower(std::int64_t in, std::int64_t width, std::int64_t depth, std::int64_t out)
      : stem(in, width), blocks(make_blocks(width, depth)), head(width, out) {}

  TM_MODULE(Tower, stem, blocks, head)

  auto forward(const auto& x) const {
    auto y = stem(x);
    for (const TowerBlock& block : blocks) {
      y = block(y);
      y = F::relu(y);
    }
    return head(y);
  }

 private:
  static M::ModuleList<TowerBlock> make_blocks(std::int64_t width, std::int64_t depth) {
    std::vector<TowerBlock> v;
    for (std::int64_t i = 0; i < depth; ++i) v.emplace_back(width);
    return M::ModuleList<TowerBlock>(std::move(v));
  }
};

}  // namespace models
