// expect: TM_MODULE: a listed member is neither a module, a tmod::Parameter, a tmod::Buffer nor tmod::none_t
// Listing a plain data member in TM_MODULE is rejected.
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/reflection.hpp>

namespace tmod = tracemod;

struct Net : tmod::Module {
  int repeats = 2;
  tracemod::nn::ReLU act;
  TM_MODULE(Net, repeats, act)
};

int main() { return Net{}.repeats - 2; }
