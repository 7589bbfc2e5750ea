// Quantization: schemes and qparams, observers, the FakeQuantize module and the QConfig presets
// (docs/quantization.md). The fake_quantize ops themselves are functional ops
// (functional/fake_quantize.hpp, included by <tracemod/functional.hpp>).
#pragma once

#include <tracemod/quant/fake_quantize.hpp>
#include <tracemod/quant/observer.hpp>
#include <tracemod/quant/observer_histogram.hpp>
#include <tracemod/quant/qconfig.hpp>
#include <tracemod/quant/qscheme.hpp>
