// expect: called with the wrong number of arguments
// F::flatten called with three positional params: it has two (start_axis, end_axis).
#include <tracemod/functional/shape_ops.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

tmod::Tensor run(const tmod::Tensor& x) { return F::flatten(x, 1, -1, 0); }
