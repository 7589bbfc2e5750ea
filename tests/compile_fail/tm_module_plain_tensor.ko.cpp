// expect: TM_MODULE: a listed member is a plain tmod::Tensor; declare it as tmod::Parameter
// A plain Tensor listed in TM_MODULE is rejected: its kind (parameter or buffer) would be unknown.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/reflection.hpp>

namespace tmod = tracemod;

struct Net : tmod::Module {
  tmod::Tensor table{tmod::zeros({4})};
  TM_MODULE(Net, table)
};

int main() { return static_cast<int>(Net{}.buffers().size()) - 1; }
