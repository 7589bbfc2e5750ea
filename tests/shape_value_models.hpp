// The modules that compute shapes as values with integer arithmetic, which both the shape-value
// suite (tests/serialize/shape_values.cpp: graphs, runs, save and load) and the ONNX suite
// (tests/onnx/dynamic_shapes.cpp: export and import) trace.
#pragma once

#include <tracemod/functional.hpp>
#include <tracemod/nn.hpp>

namespace shape_value_models {

namespace tmod = tracemod;
namespace F = tracemod::functional;

/// x.view(x.size(0) * 2, x.size(1) // 2, -1): extents computed from shapes (each in its own
/// statement, so the graph's order does not depend on the order C++ evaluates arguments in).
struct DoubledRows : tmod::Module {
  TM_MODULE(DoubledRows)
  auto forward(const auto& x) const {
    const auto rows = F::size(x, 0) * 2;
    const auto cols = F::floor_div(F::size(x, 1), 2);
    return F::reshape_to(x, F::tensor_from_list(rows, cols, -1));
  }
};

}  // namespace shape_value_models
