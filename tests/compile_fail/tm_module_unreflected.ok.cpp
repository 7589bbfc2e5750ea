// A member module whose class declares TM_MODULE is accepted.
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/reflection.hpp>

namespace tmod = tracemod;

struct Scaled : tracemod::nn::ReLU {
  tmod::Parameter scale;
  TM_MODULE(Scaled, scale)
};

struct Net : tmod::Module {
  Scaled act;
  TM_MODULE(Net, act)
};

int main() { return static_cast<int>(Net{}.named_modules().size()) - 2; }
