// The main demo, in the order a newcomer meets the library: a module traced into a graph and
// printed in MegEngine's text form; the same module's compile-time typed graph answering a
// static_assert; ResNet-18 traced, optimized, profiled, saved and loaded back with identical output.
#include <models/resnet.hpp>

#include <tracemod/profile.hpp>
#include <tracemod/tracemod.hpp>

#include <cstdio>
#include <iterator>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

struct SimpleModule : tmod::Module {
  M::Linear linear{4, 5};
  tmod::Parameter param{tmod::tensor({1.f})};
  TM_MODULE(SimpleModule, linear, param)

  auto forward(const auto& x) const {
    auto a = x + tmod::constant({1.f});
    auto r = F::relu(a);
    return linear(r + param);
  }
};

namespace {

bool same_bits(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data<float>(), b.data<float>(), static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0;
}

std::size_t expr_count(const tmod::TracedModule& t) {
  const auto exprs = t.graph().exprs(true);
  return static_cast<std::size_t>(std::distance(exprs.begin(), exprs.end()));
}

}  // namespace

int main() {
  std::printf("tracemod %s\n\n", TRACEMOD_VERSION_STRING);
  tmod::manual_seed(0);

  // 1. trace_module records forward as a graph of exprs, printed as MegEngine prints it.
  SimpleModule m;
  const tmod::Tensor x = tmod::randn({3, 4}, 42);
  const tmod::TracedModule traced = tmod::trace_module(m, x);
  std::cout << traced.graph() << "\n";

  // 2. The same forward traced at compile time: the graph is a type, queried by static_assert
  //    and evaluated as one fused loop.
  auto g = tmod::symbolic_trace(m, tmod::spec({3, 4}));
  static_assert(tmod::count_ops<F::relu_fn>(g) == 1 && tmod::count_ops<M::Linear>(g) == 1);
  std::printf("typed graph: %zu nodes, one relu and one Linear (static_assert); same output as the traced graph: %s\n\n",
              tmod::node_count(g), same_bits(g(x), traced(x).tensor()) ? "yes" : "NO");

  // 3. ResNet-18: traced, optimized (batch norms folded, epilogues fused), profiled.
  models::ResNet net = models::resnet18();
  net.eval();
  const tmod::Tensor image = tmod::randn({1, 3, 224, 224}, 1);
  const tmod::TracedModule resnet = tmod::trace_module(net, image);
  const tmod::TracedModule fast =
      tmod::optimize(resnet, {"FuseConvBn", "FuseAddMul", "BackwardFoldScale", "FuseConvEpilogue", "FuseElemwise"});
  std::printf("ResNet-18: %zu exprs traced, %zu after optimize()\n\n", expr_count(resnet), expr_count(fast));
  const tmod::profile_result profile = tmod::profile(fast, {image}, {.runs = 5});
  std::cout << profile.table(5) << "\n";
  const std::string summary = tmod::summary(resnet, tmod::spec({1, 3, 224, 224})).table();
  std::cout << summary.substr(summary.find("Total params")) << "\n";

  // 4. Saved to one file and loaded back without the model's source: the same output, bit for bit.
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "tracemod_quickstart_resnet18.tmod";
  tmod::save(fast, file);
  const tmod::TracedModule loaded = tmod::load(file);
  const bool same = same_bits(fast(image).tensor(), loaded(image).tensor());
  std::printf("saved %s (%.1f MB), loaded: output identical: %s\n", file.filename().c_str(),
              static_cast<double>(std::filesystem::file_size(file)) / 1e6, same ? "yes" : "NO");
  std::filesystem::remove(file);
  return same ? 0 : 1;
}
