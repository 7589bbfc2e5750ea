// Writes tests/data/serialize/: shared_v2.tmod (a module with shared sub-modules, a Linear and a
// user module each reached by two attributes, traced and saved in format version 2),
// shared_v2_input.npy and shared_v2_expected.npy (the eager module's output on that input). Kept
// forever: tests/serialize/shared_modules.cpp loads the file with every later version of the library.
// Build and run from the repository root (once; the files are committed):
//   g++ -std=c++20 -O2 -Iinclude tests/reference/make_serialize_v2.cpp -o /tmp/make_v2 && /tmp/make_v2 tests/data/serialize
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/io/npy.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/traced_module.hpp>
#include <filesystem>
#include <string>
namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
struct Block : tmod::Module {
  M::Linear fc{3, 3};
  TM_MODULE(Block, fc)
  auto forward(const auto& x) const { return F::relu(fc(x)); }
};
struct Twice : tmod::Module {
  TM_MODULE(Twice)
  auto forward(const auto& x) const {
    const auto y = getattr("h").as<M::Linear>()(getattr("i").as<M::Linear>()(x));
    return getattr("b2").as<Block>()(getattr("b1").as<Block>()(y));
  }
};
int main(int, char** argv) {
  tmod::manual_seed(3);
  Twice m;
  m.setattr("i", M::Linear(3, 3));
  m.share_module("h", "i");
  m.setattr("b1", Block{});
  m.share_module("b2", "b1");
  const tmod::Tensor x = tmod::randn({2, 3}, 5);
  const std::string dir = argv[1];
  tmod::save(tmod::trace_module(m, x), std::filesystem::path(dir + "/shared_v2.tmod"));
  tmod::io::save_npy(dir + "/shared_v2_input.npy", x);
  tmod::io::save_npy(dir + "/shared_v2_expected.npy", m.forward(x));
}
