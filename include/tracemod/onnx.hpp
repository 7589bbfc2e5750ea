// The optional ONNX component (link tracemod::onnx; needs Debian's libonnx-dev): export_model and
// import_model. Not part of <tracemod/tracemod.hpp>: only code that speaks ONNX pays for protobuf.
#pragma once

#include <tracemod/onnx/export.hpp>
#include <tracemod/onnx/import.hpp>
