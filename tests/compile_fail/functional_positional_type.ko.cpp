// expect: has a type its param cannot take
// F::flatten called with a string where its integer start_axis goes.
#include <tracemod/functional/shape_ops.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

tmod::Tensor run(const tmod::Tensor& x) { return F::flatten(x, "1"); }
