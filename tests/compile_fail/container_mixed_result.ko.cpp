// expect: every module class of a mixed container must return the same type for these arguments
// The elements of a container of several classes are called alike, so their forwards must agree.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/module_list.hpp>
#include <tracemod/nn/reflection.hpp>

#include <utility>

namespace tmod = tracemod;

struct Same : tmod::Module {
  TM_MODULE(Same)
  auto forward(const auto& x) const { return x; }
};
struct Pair : tmod::Module {
  TM_MODULE(Pair)
  auto forward(const auto& x) const { return std::make_pair(x, x); }
};

int main() {
  const tmod::nn::ModuleList<Same, Pair> list{Same{}, Pair{}};
  for (const auto& m : list) (void)m(tmod::zeros({2}));
}
