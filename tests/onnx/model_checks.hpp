// What the ONNX tests read of an exported model and of an imported module's output: the count of
// each node type, and the largest elementwise difference of two float32 tensors.
#pragma once

#include <tracemod/core/tensor.hpp>
#include <tracemod/onnx.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <string>

namespace tmod_test {

inline std::map<std::string, int> op_counts(const tracemod::onnx::proto::ModelProto& m) {
  std::map<std::string, int> c;
  for (const auto& n : m.graph().node()) ++c[n.op_type()];
  return c;
}

inline double max_abs_diff(const tracemod::Tensor& a, const tracemod::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double d = 0;
  for (std::size_t i = 0; i < a.values<float>().size(); ++i)
    d = std::max(d, static_cast<double>(std::abs(a.values<float>()[i] - b.values<float>()[i])));
  return d;
}

}  // namespace tmod_test
