// expect: TM_MODULE: a listed member is a module class without its own TM_MODULE
// A member module whose class derives from a module but does not declare TM_MODULE is rejected.
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/reflection.hpp>

namespace tmod = tracemod;

struct Scaled : tracemod::nn::ReLU {
  tmod::Parameter scale;
};

struct Net : tmod::Module {
  Scaled act;
  TM_MODULE(Net, act)
};

int main() { return static_cast<int>(Net{}.named_modules().size()) - 2; }
