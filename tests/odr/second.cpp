// The second translation unit of the ODR link test (see first.cpp).
#include <tracemod/profile.hpp>  // outside the umbrella
#include <tracemod/tracemod.hpp>

float second_unit_value() {
  namespace F = tracemod::functional;
  auto g = tracemod::symbolic_trace([](const auto& x) { return F::relu(x) * 2.f; }, tracemod::spec({1}));
  return g(tracemod::tensor({1.f})).item();
}
