// The compile-time tracer: tmod::symbolic_trace, typed graphs, their queries, rewrites and fused evaluation.
#pragma once

#include <tracemod/trace/apply.hpp>
#include <tracemod/trace/typed_graph.hpp>
#include <tracemod/trace/module_trace.hpp>
#include <tracemod/trace/query.hpp>
#include <tracemod/trace/rewrite.hpp>
#include <tracemod/trace/spec.hpp>
#include <tracemod/trace/symbolic_trace.hpp>

namespace tracemod {
using trace::contains_op;
using trace::count_ops;
using trace::has_static_output_shape;
using trace::node_count;
using trace::ops_of;
using trace::static_output_shape;
using trace::submodules_of;
}  // namespace tracemod
