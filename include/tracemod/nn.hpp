// The module layer: tmod::Module, TM_MODULE reflection, state dicts, and the builtin modules
// (tracemod::nn, aliased M in docs).
#pragma once

#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/attr_ref.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/channel_shuffle.hpp>
#include <tracemod/nn/constant.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/dropout.hpp>
#include <tracemod/nn/elemwise.hpp>
#include <tracemod/nn/embedding.hpp>
#include <tracemod/nn/flatten.hpp>
#include <tracemod/nn/fused.hpp>
#include <tracemod/nn/identity.hpp>
#include <tracemod/nn/init.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/member_kind.hpp>
#include <tracemod/nn/module.hpp>
#include <tracemod/nn/module_call.hpp>
#include <tracemod/nn/module_dict.hpp>
#include <tracemod/nn/module_list.hpp>
#include <tracemod/nn/module_variant.hpp>
#include <tracemod/nn/norm_layers.hpp>
#include <tracemod/nn/parameter.hpp>
#include <tracemod/nn/pooling.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/nn/sequential.hpp>
#include <tracemod/nn/transformer.hpp>
#include <tracemod/nn/upsample.hpp>
#include <tracemod/nn/state_dict.hpp>
