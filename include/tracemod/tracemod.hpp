// Umbrella header: the whole of tracemod.
#pragma once

#include <tracemod/version.hpp>
#include <tracemod/core.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/npy.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/quant.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>
