// tmod::load refuses files that are well-formed but inconsistent, with format_error at load rather
// than a crash or a wrong result at run time: duplicate attribute names, builtin tensors of the
// wrong dtype, getattr paths that reach nothing, shapes that contradict a callee, absurd configs,
// negative id counts, nonzero reserved header bytes. Edits are made on tests/data/serialize's
// version-1 ResNet (a 16x16 input, width 2).
#include <tracemod/io/npy.hpp>
#include <tracemod/io/serialize.hpp>

#include <doctest/doctest.h>

#include "serialize/edit_file.hpp"

#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include <unistd.h>

namespace tmod_test_serialize_validate {

namespace {

namespace tmod = tracemod;
namespace fs = std::filesystem;
using json = nlohmann::json;
using serialize_test::load_error;
using serialize_test::read_file;
using serialize_test::with_description;

const std::string dir = TRACEMOD_TEST_DATA_DIR "/serialize/";

const std::string& v1_file() {
  static const std::string bytes = read_file(dir + "resnet_w2_v1.tmod");
  return bytes;
}

/// The error loading the version-1 ResNet edited by `edit` raises.
std::string error_of(const std::function<void(json&)>& edit) { return load_error(with_description(v1_file(), edit)); }

json& attr(json& d, std::size_t module, const std::string& name) {
  for (json& a : d["modules"][module]["attrs"])
    if (a["name"] == name) return a;
  throw std::logic_error("no attribute " + name);
}

/// The first expr of module `module`'s graph matching `pred`.
json& expr(json& d, std::size_t module, const std::function<bool(const json&)>& pred) {
  for (json& e : d["modules"][module]["graphs"][0]["exprs"])
    if (pred(e)) return e;
  throw std::logic_error("no such expr");
}

json& config_entry(json& d, std::size_t module, const std::string& key) {
  for (json& kv : d["modules"][module]["config"]["dict"])
    if (kv[0] == key) return kv[1];
  throw std::logic_error("no config key " + key);
}

}  // namespace

TEST_CASE("load: two attributes of one name are a format_error, from a file on disk") {
  // The root's layer3 renamed layer1: a traced child under a taken name (the fuzzer's find).
  const fs::path folder = fs::temp_directory_path() / ("tracemod_validate_" + std::to_string(::getpid()));
  fs::create_directories(folder);
  const fs::path path = folder / "twice.tmod";
  {
    const std::string edited = with_description(v1_file(), [](json& d) { attr(d, 0, "layer3")["name"] = "layer1"; });
    std::ofstream(path, std::ios::binary).write(edited.data(), static_cast<std::streamsize>(edited.size()));
  }
  CHECK_THROWS_WITH_AS((void)tmod::load(path), doctest::Contains("attribute 'layer1' is defined twice"), tmod::format_error);
  fs::remove_all(folder);
  // Builtin children: bn1 renamed conv1.
  CHECK(error_of([](json& d) { attr(d, 0, "bn1")["name"] = "conv1"; }).find("module 0 (ResNet): attribute 'conv1' is defined twice") !=
        std::string::npos);
  // A dotted or empty name would reach into another module.
  CHECK(error_of([](json& d) { attr(d, 0, "fc")["name"] = "layer1.fc"; }).find("'layer1.fc' is not a plain name") !=
        std::string::npos);
  CHECK(error_of([](json& d) { attr(d, 0, "fc")["name"] = ""; }).find("'' is not a plain name") != std::string::npos);
}

TEST_CASE("load: a builtin's tensor of the wrong dtype is a format_error") {
  // conv1's weight (tensor 0) saved as int32: same byte size, so only its dtype is wrong.
  CHECK(error_of([](json& d) { d["tensors"][0]["dtype"] = "int32"; })
            .find("module 'conv1' (Conv2d): tensor 'weight' is int32, but a Conv2d's is float32") != std::string::npos);
  // bn1's num_batches_tracked (tensor 5) saved as float32.
  CHECK(error_of([](json& d) { d["tensors"][5]["dtype"] = "float32"; })
            .find("module 'bn1' (BatchNorm2d): tensor 'num_batches_tracked' is float32, but a BatchNorm2d's is int32") !=
        std::string::npos);
}

TEST_CASE("load: a getattr that reaches no attribute, or another one, is a format_error") {
  const auto getattr_of = [](const std::string& path) {
    return [path](const json& e) { return e["kind"] == "get_attr" && e["path"] == path; };
  };
  CHECK(error_of([&](json& d) { expr(d, 0, getattr_of("conv1"))["path"] = "conv9"; })
            .find("graph ResNet, expr %2: getattr(self, \"conv9\") names no attribute of ResNet") != std::string::npos);
  // A path into a child that lacks the leaf.
  CHECK(error_of([&](json& d) { expr(d, 0, getattr_of("fc"))["path"] = "layer1.fc"; }).find("names no attribute") !=
        std::string::npos);
  // The saved node type disagrees with the attribute's.
  CHECK(error_of([&](json& d) { expr(d, 0, getattr_of("conv1"))["path"] = "bn1"; })
            .find("node 'conv1' is saved as a Conv2d, but attribute 'bn1' is a BatchNorm2d") != std::string::npos);
}

TEST_CASE("load: shapes that contradict a callee are a format_error") {
  // The top graph's input made 32x32: conv1 gives 16x16, the file says 8x8.
  CHECK(error_of([](json& d) { d["modules"][0]["graphs"][0]["inputs"][1]["shape"] = json::array({1, 3, 32, 32}); })
            .find("module call 'conv1' (Conv2d): the saved output " + tmod::Shape{1, 2, 8, 8}.to_string() +
                  " float32 differs from the module's " + tmod::Shape{1, 2, 16, 16}.to_string() + " float32") !=
        std::string::npos);
  // layer1's graph (module 5) made to take 3 channels: its first call, of a traced BasicBlock
  // taking 2, contradicts it (modules are read from the leaves up, so the callee's graph is known).
  CHECK(error_of([](json& d) { d["modules"][5]["graphs"][0]["inputs"][1]["shape"] = json::array({1, 3, 4, 4}); })
            .find("module 5 (Sequential), graph ResNet_layer1, expr %15: module call '_0' (BasicBlock): argument 'x' is " +
                  tmod::Shape{1, 3, 4, 4}.to_string() + " float32, but the graph's input 'x' is " +
                  tmod::Shape{1, 2, 4, 4}.to_string() + " float32") != std::string::npos);
  // A call with a signature the callee has no graph for.
  CHECK(error_of([](json& d) {
          const json layer1 = expr(d, 0, [](const json& e) { return e["kind"] == "get_attr" && e["path"] == "layer1"; })["out"][0]["id"];
          expr(d, 0, [&](const json& e) { return e["kind"] == "module_call" && e["callee"] == layer1; })["signature"] =
              "(Tensor, Tensor)";
        }).find("has no graph for forward(Tensor, Tensor)") != std::string::npos);
}

TEST_CASE("load: absurd builtin configs are a format_error") {
  // Padding 2^40 is no model's; arithmetic on such values would overflow.
  CHECK(error_of([](json& d) { config_entry(d, 1, "padding") = json{{"tuple", json::array({1LL << 40, 3})}}; })
            .find("module 1 (Conv2d): config value 1099511627776 is out of the int32 range") != std::string::npos);
  // Padding within range but inconsistent with the saved graph.
  CHECK(error_of([](json& d) { config_entry(d, 1, "padding") = json{{"tuple", json::array({1000, 3})}}; })
            .find("module call 'conv1' (Conv2d): the saved output") != std::string::npos);
}

TEST_CASE("load: a negative total_ids and nonzero reserved header bytes are format_errors") {
  CHECK(error_of([](json& d) { d["modules"][0]["total_ids"][0] = -1; }).find("module 0 (ResNet): total_ids [-1,183] is negative") !=
        std::string::npos);
  CHECK(error_of([](json& d) { d["modules"][5]["total_ids"][1] = -7; }).find("is negative") != std::string::npos);
  for (std::size_t at = 56; at < 60; ++at)
    CHECK(load_error(serialize_test::with_header_byte(v1_file(), at, 1)) == "load: header: reserved bytes 56 to 59 are not zero");
}

TEST_CASE("load: the unedited file loads and computes its saved output") {
  CHECK(error_of([](json&) {}) == "(loaded)");
  tmod::TracedModule m = serialize_test::load_bytes(v1_file());
  const tmod::Tensor got = m(tmod::io::load_npy(dir + "input.npy")).tensor();
  const tmod::Tensor expected = tmod::io::load_npy(dir + "expected.npy");
  REQUIRE(got.shape() == expected.shape());
  for (std::size_t i = 0; i < got.values<float>().size(); ++i)
    CHECK(got.values<float>()[i] == doctest::Approx(expected.values<float>()[i]).epsilon(1e-5));
}

}  // namespace tmod_test_serialize_validate
