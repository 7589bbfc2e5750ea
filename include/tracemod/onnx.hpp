// The optional ONNX component (link tracemod::onnx; needs Debian's libonnx-dev): export_model
// (import_model follows). Not part of <tracemod/tracemod.hpp>: only code that speaks ONNX pays for protobuf.
#pragma once

#include <tracemod/onnx/export.hpp>
