// ONNX export -> import of scaled_dot_product_attention: written out at opset 13 as MatMul,
// Transpose, Mul, Add (the mask, or a causal initializer), Softmax and MatMul; the model passes
// ONNX's checker and imports as those ops, computing what eager mode does within rounding.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include "onnx/model_checks.hpp"

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace tmod_test_onnx_attention {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace proto = tracemod::onnx::proto;
using tmod::Tensor;

/// x (N, 6, 8): self-attention with a mask parameter, then causal attention with a scale over
/// (N, 2, 6, 4) heads.
struct Attend : tmod::Module {
  tmod::Parameter mask{tmod::uniform({6, 6}, -1.f, 1.f, 81)};
  tmod::Parameter wk{tmod::uniform({8}, 0.5f, 1.5f, 82)};
  TM_MODULE(Attend, mask, wk)
  auto forward(const auto& x) const {
    const auto a = F::scaled_dot_product_attention(x, x * wk, F::relu(x), mask);
    const auto h = F::transpose(F::reshape(a, {-1, 6, 2, 4}), {0, 2, 1, 3});
    const auto c = F::scaled_dot_product_attention(h, h, h - 0.25f, tmod::none, true, 0.3);
    return F::flatten(F::transpose(c, {0, 2, 1, 3}), 2);
  }
};

using tmod_test::max_abs_diff;
using tmod_test::op_counts;

}  // namespace

TEST_CASE("onnx: scaled_dot_product_attention exports as its MatMul, Mul, Add, Softmax chain and imports as those ops") {
  Attend net;
  const Tensor input = tmod::uniform({2, 6, 8}, -2.f, 2.f, 83);
  const Tensor eager = net.forward(input);
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input), {.opset = 13});
  CHECK_NOTHROW(proto::checker::check_model(model));
  const auto counts = op_counts(model);
  CHECK(counts.at("MatMul") == 4);
  CHECK(counts.at("Softmax") == 2);
  CHECK(counts.at("Add") == 2);  // the mask parameter and the causal initializer
  CHECK(counts.at("Transpose") == 2 + 2);
  std::multiset<std::int64_t> softmax_axes;
  for (const auto& n : model.graph().node())
    if (n.op_type() == "Softmax") softmax_axes.insert(n.attribute(0).i());
  CHECK(softmax_axes == std::multiset<std::int64_t>{2, 3});  // the last axis of 3-D and 4-D scores
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", 2}}});
  std::ostringstream printed;
  printed << imported.graph();
  CAPTURE(printed.str());
  CHECK(printed.str().find("nn.scaled_dot_product_attention(") == std::string::npos);
  CHECK(printed.str().find("nn.softmax(") != std::string::npos);
  CHECK(max_abs_diff(imported(input).tensor(), eager) < 1e-5);
}

}  // namespace tmod_test_onnx_attention
