// expect: a braced pair {h, w} is a positional argument only for a (height, width) param
// F::avg_pool2d called with a braced pair where its ceil_mode flag goes.
#include <tracemod/functional/pooling.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

tmod::Tensor run(const tmod::Tensor& x) { return F::avg_pool2d(x, 2, 2, 0, {1, 2}, true); }
