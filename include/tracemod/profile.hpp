// Where a forward's time goes: cost facts per call (graph/cost.hpp), tmod::summary, tmod::profile
// with its table and Chrome trace, and tmod::to_dot(traced, profile). Not part of the umbrella
// header: the summary of a plain module brings in the compile-time tracer and the lowering.
#pragma once

#include <tracemod/graph/cost.hpp>
#include <tracemod/profile/dot.hpp>
#include <tracemod/profile/profiler.hpp>
#include <tracemod/profile/report.hpp>
#include <tracemod/profile/summary.hpp>
