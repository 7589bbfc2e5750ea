// The runtime graph layer: Node/Expr/Graph, tmod::Sym recording, printing, DOT, queries, the
// interpreter and the checker.
#pragma once

#include <tracemod/graph/check.hpp>
#include <tracemod/graph/dot.hpp>
#include <tracemod/graph/expr.hpp>
#include <tracemod/graph/filter.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/graph/interpreter.hpp>
#include <tracemod/graph/node.hpp>
#include <tracemod/graph/print.hpp>
#include <tracemod/graph/recorder.hpp>
#include <tracemod/graph/sym.hpp>
#include <tracemod/graph/register_builtin.hpp>
#include <tracemod/graph/wrap.hpp>
