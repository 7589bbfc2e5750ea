// The core layer: Tensor, Shape, DType, QParams, errors, factories.
#pragma once

#include <tracemod/core/constant_scalar.hpp>
#include <tracemod/core/dtype.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/core/factories.hpp>
#include <tracemod/core/none.hpp>
#include <tracemod/core/qparams.hpp>
#include <tracemod/core/random.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/core/value.hpp>
