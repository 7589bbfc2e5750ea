// TracedModule and trace_module: the run-time tracer's result, printed, queried, run and edited;
// to_traced_module lowers the compile-time tracer's typed graphs into the same.
#pragma once

#include <tracemod/graph.hpp>
#include <tracemod/traced_module/lower.hpp>
#include <tracemod/traced_module/surgery.hpp>
#include <tracemod/traced_module/trace_module.hpp>
#include <tracemod/traced_module/traced_module.hpp>
