// expect: received a number or tmod::none where it needs a tensor
// Eager F::conv2d called with a number where its weight tensor goes.
#include <tracemod/functional/conv.hpp>

namespace tmod = tracemod;
namespace F = tracemod::functional;

tmod::Tensor run(const tmod::Tensor& x, const tmod::Tensor& w) { return F::conv2d(x, 2.f) + w; }
