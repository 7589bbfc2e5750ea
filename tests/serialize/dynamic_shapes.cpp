// Saving and loading a module traced with dynamic dims: the symbolic shapes survive the file, the
// loaded module runs at other shapes equal to eager mode, and malformed dims are format errors.
#include <tracemod/io/serialize.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/traced_module.hpp>

#include <models/resnet.hpp>

#include <doctest/doctest.h>

#include <golden.hpp>

#include "serialize/edit_file.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

namespace tmod_test_serialize_dynamic_shapes {

namespace {

namespace tmod = tracemod;

std::string output_dims(const tmod::TracedModule& t) {
  return static_cast<const tmod::graph::TensorNode*>(t.graph().outputs()[0])->shape_text();
}

}  // namespace

TEST_CASE("save -> load keeps dynamic dims: ResNet-18, plain and optimized, runs at other shapes") {
  models::ResNet net(10, 8);
  net.eval();
  const tmod::TracedModule t = tmod::trace_module(net, tmod::randn({1, 3, 32, 32}),
                                                  tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}});
  const tmod::TracedModule opt =
      tmod::optimize(t, {"FuseConvBn", "FuseAddMul", "BackwardFoldScale", "FuseConvEpilogue", "FuseElemwise"});
  const auto path = std::filesystem::temp_directory_path() / "tracemod_dynamic_resnet.tmod";
  for (const tmod::TracedModule* m : {&t, &opt}) {
    tmod::save(*m, path);
    const tmod::TracedModule back = tmod::load(path);
    CHECK(tmod::graph::to_string(back.graph()) == tmod::graph::to_string(m->graph()));
    CHECK(tmod::graph::to_string(back.graph()).starts_with("ResNet.Graph (self, x: (N, 3, H, W)) {"));
    CHECK(output_dims(back) == "(N, 10)");
    for (const tmod::Shape& s : {tmod::Shape{3, 3, 32, 32}, tmod::Shape{1, 3, 40, 48}}) {
      const tmod::Tensor in = tmod::randn(s);
      CHECK(golden::max_rel_err(back(in).tensor(), net(in)) <= 1e-4);
    }
  }
  std::filesystem::remove(path);
}

TEST_CASE("a static module's file has no dims; a malformed dim is a format error") {
  models::ResNet net(10, 8);
  net.eval();
  const tmod::TracedModule s = tmod::trace_module(net, tmod::randn({1, 3, 32, 32}));
  CHECK(serialize_test::bytes_of(s).find("\"dims\"") == std::string::npos);
  const tmod::TracedModule d =
      tmod::trace_module(net, tmod::randn({1, 3, 32, 32}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  const std::string bytes = serialize_test::bytes_of(d);
  CHECK(bytes.find(R"("dims":[{"sym":"N"},3,32,32])") != std::string::npos);
  const auto input_dims = [](serialize_test::json& doc) -> serialize_test::json& {
    return doc["modules"][0]["graphs"][0]["inputs"][1]["dims"];
  };
  CHECK(serialize_test::load_error(serialize_test::with_description(
                  bytes, [&](serialize_test::json& doc) { input_dims(doc)[0] = {{"sym", 7}}; }))
            .find("malformed symbolic dim {\"sym\":7}") != std::string::npos);
  // An op's output saved with dims its op does not infer.
  const std::string wrong = serialize_test::with_description(bytes, [&](serialize_test::json& doc) {
    for (auto& e : doc["modules"][0]["graphs"][0]["exprs"])
      if (e["kind"] == "op") e["out"][0]["dims"] = {{{"sym", "M"}}, 8};
  });
  CHECK(serialize_test::load_error(wrong).find("is saved with dims (M, 8) but its expr gives (N, 64)") != std::string::npos);
}

}  // namespace tmod_test_serialize_dynamic_shapes
