// Optimization passes over the runtime graph: the pattern matcher, the pass registry and optimize().
#pragma once

#include <tracemod/passes/erase_unused.hpp>
#include <tracemod/passes/optimize.hpp>
#include <tracemod/passes/pattern.hpp>
#include <tracemod/passes/registry.hpp>
