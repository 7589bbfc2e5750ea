// F::avg_pool2d called with a braced (height, width) padding and a ceil_mode flag.
// Done right here; functional_positional_pair.ko.cpp has the misuse.
#include <tracemod/functional/pooling.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

tmod::Tensor run(const tmod::Tensor& x) { return F::avg_pool2d(x, 2, 2, {1, 0}, true, true); }
