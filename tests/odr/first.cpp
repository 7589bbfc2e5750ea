// Two translation units that include the whole library and use it: linking them together catches a
// namespace-scope definition that is not inline (an ODR violation a single TU never shows).
#include <tracemod/profile.hpp>  // outside the umbrella
#include <tracemod/tracemod.hpp>

float second_unit_value();

int main() {
  namespace F = tracemod::functional;
  const tracemod::Tensor y = F::relu(tracemod::tensor({-1.f, 3.f})) + tracemod::c<1>;
  return y.at({1}) == 4.f && second_unit_value() == 2.f ? 0 : 1;
}
