// Saves ResNet-18 (full width) traced, an input and the eager output as .npy into a directory, for
// the run_saved test: examples/run_saved, which includes no model header, must load the module and
// reproduce the output bit for bit.
#include <tracemod/io/npy.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/traced_module.hpp>

#include <models/resnet.hpp>

#include <filesystem>
#include <iostream>

int main(int argc, char** argv) {
  namespace tmod = tracemod;
  if (argc != 2) {
    std::cerr << "usage: save_resnet18 DIR\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  models::ResNet net;
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 64, 64});
  tmod::TracedModule traced = tmod::trace_module(net, x, tmod::TraceOptions{.check = false});
  tmod::save(traced, dir / "resnet18.tmod");
  tmod::io::save_npy(dir / "input.npy", x);
  tmod::io::save_npy(dir / "expected.npy", net(x));
  return 0;
}
