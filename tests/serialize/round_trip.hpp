// What the save/load tests of single ops compare with: the bits of two tensors, a traced module
// saved to bytes and loaded back, a graph's printed text and its output's symbolic shape.
#pragma once

#include <tracemod/core/tensor.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/traced_module.hpp>

#include <cstring>
#include <span>
#include <sstream>
#include <string>

namespace serialize_test {

/// Same shape and the same bytes.
inline bool same_bits(const tracemod::Tensor& a, const tracemod::Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

/// `m` saved with tmod::save into memory and loaded back with tmod::load.
inline tracemod::TracedModule round_trip(const tracemod::TracedModule& m) {
  std::ostringstream os;
  tracemod::save(m, os);
  const std::string bytes = os.str();
  return tracemod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

/// The top graph as it prints.
inline std::string text(const tracemod::TracedModule& m) {
  std::ostringstream os;
  os << m.graph();
  return os.str();
}

/// The symbolic shape of the top graph's first output, as it prints ("(batch, 3, H*2, W*2)").
inline std::string output_dims(const tracemod::TracedModule& m) {
  return static_cast<const tracemod::graph::TensorNode*>(m.graph().outputs()[0])->shape_text();
}

}  // namespace serialize_test
