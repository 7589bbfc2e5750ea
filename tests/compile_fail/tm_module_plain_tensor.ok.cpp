// Tensors listed in TM_MODULE are declared as Parameter or Buffer.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/reflection.hpp>

namespace tmod = tracemod;

struct Net : tmod::Module {
  tmod::Buffer table{tmod::zeros({4})};
  TM_MODULE(Net, table)
};

int main() { return static_cast<int>(Net{}.buffers().size()) - 1; }
