// tmod::optimize(traced, {"FuseConvBn", "FuseAddMul", "BackwardFoldScale"}) (MegEngine's
// traced_module.optimize): an optimized copy of a traced module; the input is untouched.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/check.hpp>
#include <tracemod/passes/registry.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace tracemod {

namespace detail {

/// Runs `p` (its requirements first) on every graph of `m`, checking `m` after each iteration.
inline void run_pass(TracedModule& m, const Pass& p, std::vector<std::string>& running) {
  if (std::find(running.begin(), running.end(), p.name) != running.end())
    throw graph_error("optimize: pass '" + p.name + "' requires itself (through " + running.back() + ")");
  running.push_back(p.name);
  for (const std::string& r : p.requirements) run_pass(m, *pass_registry::instance().at(r), running);
  const int iterations = p.run_once ? 1 : p.max_iterations;
  bool converged = p.run_once;
  for (int i = 0; i < iterations; ++i) {
    bool changed = false;
    for (graph::Graph* g : m.graph().graphs(true)) changed = p.run(*g) || changed;
    try {
      check(m.graph());
    } catch (const graph_error& e) {
      throw graph_error("optimize: pass '" + p.name + "' left a broken graph: " + e.what());
    }
    if (!changed) {
      converged = true;
      break;
    }
  }
  if (!converged)
    throw graph_error("optimize: pass '" + p.name + "' still changed the graph after " +
                      std::to_string(p.max_iterations) + " iterations (it does not converge)");
  running.pop_back();
}

}  // namespace detail

/// A copy of `traced` with the named passes applied, in registration order (registered_passes());
/// each runs its requirements first. Throws value_error for an unknown name (listing the known
/// ones) before any work, and graph_error if a pass breaks the graph or does not converge.
[[nodiscard]] inline TracedModule optimize(const TracedModule& traced, const std::vector<std::string>& names) {
  const pass_registry& registry = pass_registry::instance();
  for (const std::string& n : names) static_cast<void>(registry.at(n));
  TracedModule out(traced);
  for (const std::string& n : registry.names()) {
    if (std::find(names.begin(), names.end(), n) == names.end()) continue;
    std::vector<std::string> running;
    detail::run_pass(out, *registry.at(n), running);
  }
  return out;
}

}  // namespace tracemod
