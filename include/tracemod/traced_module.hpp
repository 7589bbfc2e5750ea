// TracedModule and trace_module: the run-time tracer's result, printed, queried, run and edited.
#pragma once

#include <tracemod/graph.hpp>
#include <tracemod/traced_module/trace_module.hpp>
#include <tracemod/traced_module/traced_module.hpp>
