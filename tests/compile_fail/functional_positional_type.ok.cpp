// F::flatten called with an integer start_axis.
// Done right here; functional_positional_type.ko.cpp has the misuse.
#include <tracemod/functional/shape_ops.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

tmod::Tensor run(const tmod::Tensor& x) { return F::flatten(x, 1); }
