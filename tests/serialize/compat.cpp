// Files of older format versions load forever: tests/data/serialize/resnet_w2_v1.tmod was written by
// format version 1 (tests/reference/make_serialize_v1.cpp) and must load and compute the eager
// module's output it was saved with; upgraders registered for old versions rewrite its exprs.
#include <tracemod/io/npy.hpp>
#include <tracemod/io/serialize.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace tmod_test_serialize_compat {

namespace {

namespace tmod = tracemod;
using json = nlohmann::json;

const std::string dir = TRACEMOD_TEST_DATA_DIR "/serialize/";

void check_close(const tmod::Tensor& got, const tmod::Tensor& expected) {
  REQUIRE(got.shape() == expected.shape());
  const auto a = got.values<float>();
  const auto b = expected.values<float>();
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(std::abs(a[i] - b[i]) <= 1e-5f * std::max(1.0f, std::abs(b[i])));
}

}  // namespace

TEST_CASE("compat: a format-version-1 file loads and computes its saved output") {
  tmod::TracedModule m = tmod::load(dir + "resnet_w2_v1.tmod");
  CHECK(m.type_name() == "ResNet");
  check_close(m(tmod::io::load_npy(dir + "input.npy")).tensor(), tmod::io::load_npy(dir + "expected.npy"));
}

TEST_CASE("compat: an op loader for old versions rewrites an expr and inserts one before it") {
  // Pretend version 2 changed tensor.flatten: version-1 files get `reshape(x, (1, -1))` inserted
  // before each flatten, which then flattens the reshaped node (same result).
  const auto saved_ids = tmod::load(dir + "resnet_w2_v1.tmod").total_ids();
  tmod::register_op_loader("tensor.flatten", tmod::io::format_version + 1, [](json e) {
    const json x = e["args"][0];
    json out = e["out"][0];
    out["id"] = 1000000;
    out["name"] = "upgraded";
    out["shape"] = json::array({1, 16});
    json reshape{{"id", 1000000}, {"kind", "op"}, {"target", "tensor.reshape"}, {"args", json::array({x})},
                 {"params", json::array({json{{"tuple", json::array({1, -1})}}})}, {"out", json::array({out})}};
    e["args"][0] = json{{"node", 1000000}};
    return std::vector<json>{reshape, e};
  });
  tmod::TracedModule m = tmod::load(dir + "resnet_w2_v1.tmod");
  tmod::remove_op_loaders("tensor.flatten");
  CHECK(m.graph().get_function_by_type("tensor.reshape", false).as_list().size() == 1);
  CHECK(m.graph().get_node_by_name("upgraded", true, false).as_list().size() == 1);
  // The loader's placeholder ids are replaced by the ids after the file's (MegEngine's load
  // renumbers too), and total_ids counts past every id, as MegEngine's _check_id requires.
  const tmod::graph::Expr* reshape = m.graph().get_function_by_type("tensor.reshape", false).as_list().front();
  CHECK(reshape->id() == saved_ids.second);
  CHECK(reshape->output()->id() == saved_ids.first);
  std::int64_t max_node = -1, max_expr = -1;
  for (const tmod::graph::Expr* e : m.graph().exprs(true)) {
    max_expr = std::max(max_expr, e->id());
    for (const tmod::graph::Node* n : e->outputs()) max_node = std::max(max_node, n->id());
  }
  CHECK(m.total_ids() == std::pair<std::int64_t, std::int64_t>{max_node + 1, max_expr + 1});
  CHECK(m.total_ids() == std::pair<std::int64_t, std::int64_t>{saved_ids.first + 1, saved_ids.second + 1});
  check_close(m(tmod::io::load_npy(dir + "input.npy")).tensor(), tmod::io::load_npy(dir + "expected.npy"));
  // Files of the current version are not touched by it.
  CHECK(tmod::load(dir + "resnet_w2_v1.tmod").graph().get_function_by_type("tensor.reshape", false).as_list().empty());
}

TEST_CASE("compat: a module loader rewrites a saved module's config") {
  // Pretend a later version changed how Linear is saved: version-1 modules are rewritten on load.
  tmod::register_module_loader("Linear", tmod::io::format_version + 1, [](json& module) { module["training"] = true; });
  tmod::TracedModule m = tmod::load(dir + "resnet_w2_v1.tmod");
  tmod::remove_module_loaders("Linear");
  CHECK(m.getattr("fc").module().training());
  CHECK_FALSE(tmod::load(dir + "resnet_w2_v1.tmod").getattr("fc").module().training());
}

}  // namespace tmod_test_serialize_compat
