// save / load of modules that hold containers: the loaded module tree keeps the ModuleDict under its
// keys and the ModuleList of several classes under its indices (paths, types, state_dict keys and
// weights), prints the same graphs and computes what eager mode computes; a list of traced values
// (F::tensor_from_list, one tensor.stack call with its Constants) saves and loads too.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/module_dict.hpp>
#include <tracemod/nn/module_list.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace tmod_test_serialize_containers {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("tracemod_containers_" + std::to_string(::getpid()) + "_" + name);
}

bool same_values(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() && std::ranges::equal(a.values<float>(), b.values<float>());
}

struct Doubled : tmod::Module {
  M::Linear fc{5, 5};
  TM_MODULE(Doubled, fc)
  auto forward(const auto& x) const { return fc(x) * 2.f; }
};

/// A dict of three classes looked up by key, a list of two classes looped over, and a list of
/// values with a traced item.
struct Net : tmod::Module {
  M::ModuleDict<M::Linear, Doubled, M::ReLU> blocks{{"stem", M::Linear(3, 5)}, {"body", Doubled{}}, {"act", M::ReLU{}}};
  M::ModuleList<M::Linear, M::ReLU> head{M::Linear(5, 4), M::ReLU{}};
  TM_MODULE(Net, blocks, head)
  auto forward(const auto& x) const {
    auto y = blocks["act"](blocks["body"](blocks["stem"](x)));
    for (const auto& layer : head) y = layer(y);
    auto first = F::reshape(F::flatten(y), {-1});  // (8,) for a batch of 2
    auto norm = F::reshape(F::matmul(F::reshape(y, {1, 8}), F::reshape(y, {8, 1})), F::int_list{});  // 0-d
    auto scale = F::tensor_from_list(0.5, norm, 1, 0.5);
    auto pairs = F::reshape(F::stack(std::make_tuple(first, first), 1), {2, 8});
    return F::concat(std::make_tuple(y * scale, pairs), 1);
  }
};

std::vector<std::string> paths_and_types(const tmod::Module& m) {
  std::vector<std::string> out;
  for (const auto& [path, child] : m.named_modules()) out.push_back(path + ":" + std::string(child.type_name()));
  return out;
}

}  // namespace

TEST_CASE("save / load: the loaded module tree keeps a ModuleDict and a ModuleList of several classes") {
  tmod::manual_seed(21);
  Net m;
  const tmod::Tensor x = tmod::randn({2, 3}, 22);
  const tmod::Tensor eager = m(x);
  tmod::TracedModule traced = tmod::trace_module(m, x);
  const auto path = scratch("net.tmod");
  tmod::save(traced, path);
  const tmod::TracedModule loaded = tmod::load(path);
  std::filesystem::remove(path);

  // The tree: the original's paths, with user modules (and the containers) as traced modules.
  CHECK(paths_and_types(loaded) == std::vector<std::string>{":Net", "blocks:ModuleDict", "blocks.stem:Linear",
                                                            "blocks.body:Doubled", "blocks.body.fc:Linear",
                                                            "blocks.act:ReLU", "head:ModuleList", "head.0:Linear",
                                                            "head.1:ReLU"});
  CHECK(paths_and_types(loaded) == paths_and_types(traced));
  CHECK(loaded.state_dict().keys() == m.state_dict().keys());
  for (const auto& entry : m.state_dict())
    CHECK_MESSAGE(same_values(loaded.state_dict().at(entry.first), entry.second), entry.first);
  CHECK(tmod::graph::to_string(loaded.graph()) == tmod::graph::to_string(traced.graph()));
  CHECK(loaded.graph().get_function_by_type(F::stack).as_count() == 2);

  CHECK(same_values(traced(x).tensor(), eager));
  CHECK(same_values(loaded(x).tensor(), eager));
  const tmod::Tensor other = tmod::randn({2, 3}, 23);
  CHECK(same_values(loaded(other).tensor(), m(other)));
}

}  // namespace tmod_test_serialize_containers
