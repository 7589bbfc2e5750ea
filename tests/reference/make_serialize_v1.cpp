// Writes tests/data/serialize/: resnet_w2_v1.tmod (a narrow ResNet-18 traced and saved in format
// version 1), input.npy and expected.npy (the eager module's output on that input). Kept forever:
// tests/serialize/compat.cpp loads the file with every later version of the library.
// Build and run from the repository root (once; the files are committed):
//   g++ -std=c++20 -O2 -Iinclude -Iexamples tests/reference/make_serialize_v1.cpp -o /tmp/make_v1 && /tmp/make_v1
#include <tracemod/io/npy.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/traced_module.hpp>

#include <models/resnet.hpp>

int main() {
  namespace tmod = tracemod;
  models::ResNet net(10, 2);
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 16, 16}, 2026);
  tmod::save(tmod::trace_module(net, x), "tests/data/serialize/resnet_w2_v1.tmod");
  tmod::io::save_npy("tests/data/serialize/input.npy", x);
  tmod::io::save_npy("tests/data/serialize/expected.npy", net(x));
}
