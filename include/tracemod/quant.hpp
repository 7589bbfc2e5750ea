// Quantization: schemes and qparams, observers, the FakeQuantize module, the QConfig presets,
// quant::prepare (observers in a traced graph) with the qparams it observes, and the int8 GEMM with its requantizing epilogue (kernels/int8_gemm.hpp; docs/quantization.md). The
// fake_quantize ops themselves are functional ops (functional/fake_quantize.hpp, included by
// <tracemod/functional.hpp>).
#pragma once

#include <tracemod/kernels/int8_gemm.hpp>
#include <tracemod/quant/convert.hpp>
#include <tracemod/quant/fake_quantize.hpp>
#include <tracemod/quant/graph_qparams.hpp>
#include <tracemod/quant/observer.hpp>
#include <tracemod/quant/observer_histogram.hpp>
#include <tracemod/quant/observer_spec.hpp>
#include <tracemod/quant/prepare.hpp>
#include <tracemod/quant/qconfig.hpp>
#include <tracemod/quant/qscheme.hpp>
