// tmod::constant: a tensor a forward creates from literal values. Eagerly it is just that tensor;
// the tracer overloads it so that a traced graph records a Constant expr (MegEngine's const_tensor).
#pragma once

#include <tracemod/core/factories.hpp>
#include <tracemod/core/tensor.hpp>

#include <initializer_list>

namespace tracemod {

[[nodiscard]] inline Tensor constant(std::initializer_list<float> values) { return tensor(values); }
[[nodiscard]] inline Tensor constant(const Tensor& value) { return value; }

}  // namespace tracemod
