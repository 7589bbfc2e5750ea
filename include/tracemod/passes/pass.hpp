// A pass (MLIR's Pass, MegEngine's BasePass): a named rewrite of one runtime graph, with the passes
// it requires run first, run once or repeated until it changes nothing. optimize() (optimize.hpp)
// runs passes found by name in the pass registry (registry.hpp) on every graph of a traced module
// and checks the module after each. Pass is an aggregate, and every pass declares itself with
// designated initialisers, naming only the fields that differ from their defaults:
//   Pass{.name = "FuseAddMul", .requirements = {"NormElemWise"}, .run_once = false, .run = ...}
#pragma once

#include <tracemod/graph/graph.hpp>

#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace tracemod {

struct Pass {
  /// The name optimize() takes ("FuseConvBn").
  std::string name;
  /// Passes run (with their own requirements) before this one, each time this one runs.
  std::vector<std::string> requirements = {};
  /// Run once, or repeat until an iteration changes no graph (at most max_iterations times; a
  /// pass still changing the graph then fails with a graph_error naming it).
  bool run_once = true;
  int max_iterations = 100;
  /// Rewrites one graph in place and returns whether it changed anything. optimize() calls it for
  /// the top graph and every graph it calls (each once); a pass must leave a graph that passes
  /// tmod::check and holds no expr it left unused (passes::replace_and_erase, passes::erase_unused).
  std::function<bool(graph::Graph&)> run = {};
};
static_assert(std::is_aggregate_v<Pass>, "passes are declared with designated initialisers");

}  // namespace tracemod
