// A non-tensor type (std::string) passed to an op beside a symbolic tensor.
// Done right here; trace_non_tensor_operand.ko.cpp has the misuse.
#include <tracemod/trace.hpp>

#include <string>

namespace tmod = tracemod;
namespace F = tracemod::functional;

void trace() {
  const std::string offset = "1";
  const auto g = tmod::symbolic_trace([&](const auto& x) { return F::add(x, std::stof(offset)); }, tmod::spec({3}));
  (void)g;
}
