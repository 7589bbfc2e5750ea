// The elements of a container of several classes return one type for the arguments they are called with.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/module_list.hpp>
#include <tracemod/nn/reflection.hpp>

namespace tmod = tracemod;

struct Same : tmod::Module {
  TM_MODULE(Same)
  auto forward(const auto& x) const { return x; }
};
struct Twice : tmod::Module {
  TM_MODULE(Twice)
  auto forward(const auto& x) const { return tmod::Tensor(x); }
};

int main() {
  const tmod::nn::ModuleList<Same, Twice> list{Same{}, Twice{}};
  for (const auto& m : list) (void)m(tmod::zeros({2}));
}
