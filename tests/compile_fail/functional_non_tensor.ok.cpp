// Eager F::conv2d called with a number where its weight tensor goes.
// Done right here; functional_non_tensor.ko.cpp has the misuse.
#include <tracemod/functional/conv.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

tmod::Tensor run(const tmod::Tensor& x, const tmod::Tensor& w) { return F::conv2d(x, w); }
