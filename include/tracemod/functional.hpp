// Every functional op (tracemod::functional, aliased F in docs) and the Tensor operators.
#pragma once

#include <tracemod/functional/activations.hpp>
#include <tracemod/functional/astype.hpp>
#include <tracemod/functional/attention.hpp>
#include <tracemod/functional/broadcast_to.hpp>
#include <tracemod/functional/compare.hpp>
#include <tracemod/functional/conv.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/functional/embedding.hpp>
#include <tracemod/functional/fake_quantize.hpp>
#include <tracemod/functional/fused_elementwise.hpp>
#include <tracemod/functional/indexing.hpp>
#include <tracemod/functional/interpolate.hpp>
#include <tracemod/functional/layer_norm.hpp>
#include <tracemod/functional/linalg.hpp>
#include <tracemod/functional/normalization.hpp>
#include <tracemod/functional/pad.hpp>
#include <tracemod/functional/pooling.hpp>
#include <tracemod/functional/power.hpp>
#include <tracemod/functional/reduce.hpp>
#include <tracemod/functional/shape_ops.hpp>
#include <tracemod/functional/shape_values.hpp>
#include <tracemod/functional/softmax.hpp>
#include <tracemod/functional/stack.hpp>
#include <tracemod/functional/tensor_methods.hpp>
