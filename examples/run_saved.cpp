// run_saved model.tmod input.npy [output.npy]: loads any module saved with tmod::save and runs it on
// an .npy input, printing its graph and the output's shape. It includes no model header: user
// modules come back as traced modules, builtin modules from tracemod's registry.
#include <tracemod/io/npy.hpp>
#include <tracemod/io/serialize.hpp>

#include <exception>
#include <iostream>

namespace tmod = tracemod;

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::cerr << "usage: run_saved model.tmod input.npy [output.npy]\n";
    return 2;
  }
  try {
    tmod::TracedModule model = tmod::load(argv[1]);
    model.eval();
    std::cout << model.graph() << "\n";
    const tmod::Tensor input = tmod::io::load_npy(argv[2]);
    const tmod::Value out = model(input);
    if (out.is_tensor()) {
      std::cout << "output shape: " << out.tensor().shape().to_string() << "\n";
      if (argc == 4) tmod::io::save_npy(argv[3], out.tensor());
    } else {
      std::cout << "output: " << out.repr() << "\n";
      if (argc == 4) throw tmod::value_error("run_saved: the output is not one tensor, cannot write " + std::string(argv[3]));
    }
  } catch (const std::exception& e) {
    std::cerr << "run_saved: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
