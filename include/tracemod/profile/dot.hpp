// tmod::to_dot(traced, profile): the traced module's graph in DOT (graph/dot.hpp) with each call's
// box filled by its share of the forward's time (white for none, red for the slowest call) and
// labelled with its median time, share and achieved GFLOP/s.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/dot.hpp>
#include <tracemod/profile/format.hpp>
#include <tracemod/profile/profiler.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace tracemod {

/// The graph of `traced` with the times of `profile` (which must come from profiling `traced`).
inline std::string to_dot(const TracedModule& traced, const profile_result& profile) {
  double slowest = 0;
  for (const expr_profile* e : profile.leaves()) slowest = std::max(slowest, e->seconds);
  const double total = profile.leaf_seconds();
  return graph::to_dot(traced.graph(), [&](const graph::Expr& e, std::size_t call, std::vector<std::string>& lines,
                                          std::string& attrs) {
    if (call >= profile.exprs.size() || profile.exprs[call].expr != &e)
      throw graph_error("tmod::to_dot: the profile was not taken from this traced module (call " +
                        std::to_string(call) + " differs)");
    const expr_profile& p = profile.exprs[call];
    lines.push_back(profile_detail::fixed(p.seconds * 1e3, 3) + " ms (" +
                    profile_detail::fixed(total > 0 ? 100 * p.seconds / total : 0, 1) + " %), " +
                    profile_detail::fixed(p.gflops(), 1) + " GFLOP/s");
    if (!p.leaf) return;  // a user module's cluster shows where its time goes
    const double heat = slowest > 0 ? std::min(1.0, p.seconds / slowest) : 0;
    attrs = "style=filled, fillcolor=\"0.000 " + profile_detail::fixed(heat, 3) + " 1.000\"";
  });
}

}  // namespace tracemod
