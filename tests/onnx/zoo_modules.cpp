// ONNX export of ChannelShuffle (Reshape, Transpose, Reshape to Shape(x)), Embedding (Gather) and a
// TransformerEncoderLayer with a padding mask (the ops its forward records): each passes ONNX's
// checker, and the ones import reads compute what eager mode does.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include "onnx/model_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>

namespace tmod_test_onnx_zoo_modules {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
namespace proto = tracemod::onnx::proto;
using tmod::Tensor;

struct Shuffle : tmod::Module {
  M::ChannelShuffle shuffle{2};
  TM_MODULE(Shuffle, shuffle)
  auto forward(const auto& x) const { return shuffle(x); }
};

struct Lookup : tmod::Module {
  M::Embedding emb{7, 3};
  TM_MODULE(Lookup, emb)
  auto forward(const auto& x) const { return emb(x); }
};

using tmod_test::max_abs_diff;
using tmod_test::op_counts;

}  // namespace

TEST_CASE("onnx: ChannelShuffle exports as Reshape, Transpose and Reshape, and imports computing it") {
  Shuffle net;
  const Tensor x = tmod::randn({2, 6, 3, 2}, 5);
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, x));
  CHECK_NOTHROW(proto::checker::check_model(model));
  const auto counts = op_counts(model);
  CHECK(counts.at("Reshape") == 2);
  CHECK(counts.at("Transpose") == 1);
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  CHECK(max_abs_diff(imported(x).tensor(), net(x)) == 0);
}

TEST_CASE("onnx: Embedding exports as Gather of its weight by the int32 indices") {
  Lookup net;
  Tensor idx = Tensor::empty({2, 2}, tmod::DType::int32);
  const std::int32_t values[] = {6, 0, 2, 2};
  std::copy(std::begin(values), std::end(values), idx.data<std::int32_t>());
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, idx));
  CHECK_NOTHROW(proto::checker::check_model(model));
  REQUIRE(op_counts(model).at("Gather") == 1);
  for (const auto& n : model.graph().node())
    if (n.op_type() == "Gather") CHECK(n.input(0) == "emb.weight");
}

TEST_CASE("onnx: a TransformerEncoderLayer with a padding mask exports, and imports computing it") {
  M::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16, .activation = "gelu", .batch_first = true});
  layer.eval();
  const Tensor x = tmod::randn({2, 5, 8}, 11);
  const Tensor mask = F::greater(tmod::randn({2, 5}, 12), tmod::full({1}, 0.8));
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(layer, x, mask));
  CHECK_NOTHROW(proto::checker::check_model(model));
  CHECK(op_counts(model).at("Where") == 1);
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  CHECK(max_abs_diff(imported(x, mask).tensor(), layer(x, mask)) < 1e-5);
}

}  // namespace tmod_test_onnx_zoo_modules
