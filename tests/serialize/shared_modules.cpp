// Shared sub-modules through trace_module and save/load: a module reached by two attributes is one
// traced module (one ModuleNode in the graph, one set of weights), and the file stores it once with
// the second attribute as an alias, shared again after load. References: the eager module with the
// same weights changed, and the traced module before saving.
#include <tracemod/functional.hpp>
#include <tracemod/io/npy.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include "serialize/edit_file.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace tmod_test_serialize_shared_modules {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
using json = nlohmann::json;

struct Block : tmod::Module {
  M::Linear fc{3, 3};
  TM_MODULE(Block, fc)
  auto forward(const auto& x) const { return F::relu(fc(x)); }
};

/// Calls the Linear `i` through `i` and its alias `h`, and the user module `b1` through `b1` and `b2`.
struct Twice : tmod::Module {
  TM_MODULE(Twice)
  auto forward(const auto& x) const {
    const auto y = getattr("h").as<M::Linear>()(getattr("i").as<M::Linear>()(x));
    return getattr("b2").as<Block>()(getattr("b1").as<Block>()(y));
  }
};

Twice shared_twice() {
  tmod::manual_seed(3);
  Twice m;
  m.setattr("i", M::Linear(3, 3));
  m.share_module("h", "i");
  m.setattr("b1", Block{});
  m.share_module("b2", "b1");
  return m;
}

bool same_values(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() && std::ranges::equal(a.values<float>(), b.values<float>());
}

std::vector<std::string> paths(const tmod::Module& m) {
  std::vector<std::string> result;
  for (const auto& [path, sub] : m.named_modules("", false)) result.push_back(path);
  return result;
}

json description(const std::string& file) {
  std::uint64_t json_size = 0;
  std::memcpy(&json_size, file.data() + 32, 8);
  return json::parse(file.substr(64, json_size));
}

/// Rebinds the two weights through the alias paths given (a new tensor each: the module's own buffers stay).
void set_weights(tmod::Module& m, const std::string& linear, const std::string& block) {
  m.setattr(linear + ".weight", tmod::Parameter(tmod::randn({3, 3}, 11)));
  m.setattr(block + ".fc.weight", tmod::Parameter(tmod::randn({3, 3}, 12)));
}

}  // namespace

TEST_CASE("trace_module: a module called through two attributes is one module, one node, one set of weights") {
  Twice m = shared_twice();
  const tmod::Tensor x = tmod::randn({2, 3}, 5);
  tmod::TracedModule traced = tmod::trace_module(m, x);  // checks against eager mode
  CHECK(&traced.getattr("h").module() == &traced.getattr("i").module());
  CHECK(&traced.getattr("b2").module() == &traced.getattr("b1").module());
  CHECK(paths(traced) == paths(m));
  // The four calls use two ModuleNodes, each the getattr of the module's first path (as torch.fx).
  std::vector<std::string> called;
  for (const tmod::graph::Expr* e : traced.graph().exprs(false))
    if (e->is_module_call()) called.push_back(e->inputs().front()->expr()->target());
  CHECK(called == std::vector<std::string>{"i", "i", "b1", "b1"});
  CHECK(traced.getattr("b1").as<tmod::TracedModule>().graphs().size() == 1);

  const tmod::Tensor before = traced(x).tensor();
  set_weights(traced, "h", "b2");  // through the aliases; both calls of each see it
  set_weights(m, "i", "b1");       // the eager reference, through the first paths
  const tmod::Tensor after = traced(x).tensor();
  CHECK_FALSE(same_values(before, after));
  CHECK(same_values(after, m.forward(x)));
}

TEST_CASE("save/load: a shared module is stored once, the other attribute as an alias, shared again after load") {
  Twice m = shared_twice();
  const tmod::Tensor x = tmod::randn({2, 3}, 5);
  tmod::TracedModule traced = tmod::trace_module(m, x);
  const std::string file = serialize_test::bytes_of(traced);
  CHECK(static_cast<int>(file[8]) == static_cast<int>(tmod::io::format_version));
  const json d = description(file);
  CHECK(d["modules"].size() == 4);  // Twice, the Linear, Block and its Linear: each once
  const json& root_attrs = d["modules"][0]["attrs"];
  std::vector<std::string> kinds;
  for (const json& a : root_attrs) kinds.push_back(a["name"].get<std::string>() + (a.contains("alias") ? "=alias" : "=module"));
  CHECK(kinds == std::vector<std::string>{"i=module", "h=alias", "b1=module", "b2=alias"});

  tmod::TracedModule loaded = serialize_test::load_bytes(file);
  CHECK(&loaded.getattr("h").module() == &loaded.getattr("i").module());
  CHECK(&loaded.getattr("b2").module() == &loaded.getattr("b1").module());
  CHECK(paths(loaded) == paths(traced));
  CHECK(same_values(loaded(x).tensor(), traced(x).tensor()));
  set_weights(loaded, "h", "b2");
  set_weights(traced, "i", "b1");
  CHECK(same_values(loaded(x).tensor(), traced(x).tensor()));
  // Saved again, the file is the same (aliases stay aliases).
  CHECK(serialize_test::bytes_of(loaded).size() == serialize_test::bytes_of(traced).size());
}

TEST_CASE("save/load: an alias that would put a module inside itself, or that holds a module no attribute holds, is refused") {
  Twice m = shared_twice();
  const std::string file = serialize_test::bytes_of(tmod::trace_module(m, tmod::randn({2, 3}, 5)));
  const auto error_of = [&](const std::function<void(json&)>& edit) {
    return serialize_test::load_error(serialize_test::with_description(file, edit));
  };
  const auto block_index = [](json& d) {  // the Block module, holding its Linear
    for (std::size_t k = 0; k < d["modules"].size(); ++k)
      if (d["modules"][k]["type"] == "Block") return k;
    return std::size_t{0};
  };
  const std::string up = error_of([&](json& d) {
    d["modules"][block_index(d)]["attrs"].push_back(json{{"name", "up"}, {"alias", 0}});
  });
  CHECK(up.find("attribute 'up' aliases module 0") != std::string::npos);
  CHECK(up.find("cannot contain itself") != std::string::npos);
  const std::string orphan = error_of([](json& d) {
    for (json& a : d["modules"][0]["attrs"])
      if (a["name"] == "i") a = json{{"name", "i"}, {"alias", a["module"]}};
  });
  CHECK(orphan.find("is attribute of no module") != std::string::npos);
}

TEST_CASE("compat: a format-version-2 file with shared modules loads them shared and computes its saved output") {
  // Written by this library from the module of shared_twice(); the expected output is the eager run.
  const std::string dir = std::string(TRACEMOD_TEST_DATA_DIR) + "/serialize/";
  tmod::TracedModule loaded = tmod::load(dir + "shared_v2.tmod");
  CHECK(&loaded.getattr("h").module() == &loaded.getattr("i").module());
  CHECK(&loaded.getattr("b2").module() == &loaded.getattr("b1").module());
  const tmod::Tensor out = loaded(tmod::io::load_npy(dir + "shared_v2_input.npy")).tensor();
  CHECK(same_values(out, tmod::io::load_npy(dir + "shared_v2_expected.npy")));
}

}  // namespace tmod_test_serialize_shared_modules
