// Plain data members (sizes, flags) stay out of TM_MODULE.
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/reflection.hpp>

namespace tmod = tracemod;

struct Net : tmod::Module {
  int repeats = 2;
  tracemod::nn::ReLU act;
  TM_MODULE(Net, act)
};

int main() { return Net{}.repeats - 2; }
