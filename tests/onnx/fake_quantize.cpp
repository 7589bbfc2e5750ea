// ONNX export of fake_quantize: QuantizeLinear then DequantizeLinear per call (an int8 or uint8 zero
// point by the range, per axis for the per-channel op), which passes ONNX's checker; ranges that
// QuantizeLinear cannot state are refused, naming the call.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/quant.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <map>
#include <string>

namespace tmod_test_onnx_fake_quantize {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace proto = tracemod::onnx::proto;
using tmod::Tensor;

struct Quantized : tmod::Module {
  Tensor scale = tmod::tensor({0.05f, 0.1f, 0.02f});
  Tensor zero_point = tmod::zeros({3}, tmod::DType::int32);
  std::int64_t quant_min = -128;
  TM_MODULE(Quantized)
  auto forward(const auto& x) const {
    const auto a = F::fake_quantize(F::relu(x), 0.03125, 3, quant_min, 127);
    return F::fake_quantize_per_channel(a - 0.5f, scale, zero_point, 1, 0, 255);
  }
};

const Tensor input = tmod::uniform({2, 3, 4, 5}, -2.f, 2.f, 93);

const proto::TensorProto* initializer(const proto::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

struct Observed : tmod::Module {
  tmod::nn::FakeQuantize act;
  tmod::nn::FakeQuantize per_channel{std::make_unique<tracemod::quant::PerChannelMinMaxObserver>(
      tracemod::quant::QScheme{.mode = tracemod::quant::QMode::symmetric, .per_channel = true, .axis = 1})};
  Observed()
      : act(std::make_unique<tracemod::quant::MinMaxObserver>(
            tracemod::quant::QScheme{.dtype = tracemod::quant::QuantDType::quint8()})) {}
  TM_MODULE(Observed, act, per_channel)
  auto forward(const auto& x) const { return per_channel(act(x)); }
};

}  // namespace

TEST_CASE("onnx: a FakeQuantize module exports its observed qparams as QuantizeLinear and DequantizeLinear") {
  Observed net;
  const tmod::TracedModule t = tmod::trace_module(net, input);  // tracing runs forward: both observe input
  const auto model = tmod::onnx::to_onnx(t, {.opset = 13});
  CHECK_NOTHROW(proto::checker::check_model(model));
  std::vector<const proto::NodeProto*> quantize;
  for (const auto& n : model.graph().node())
    if (n.op_type() == "QuantizeLinear") quantize.push_back(&n);
  REQUIRE(quantize.size() == 2);
  const proto::TensorProto* zp = initializer(model, quantize[0]->input(2));
  REQUIRE(zp != nullptr);
  CHECK(zp->data_type() == proto::TensorProto::UINT8);
  const tracemod::quant::QParamsTensors q = t.getattr("act").as<tmod::nn::FakeQuantize>().calculate_qparams();
  CHECK(zp->int32_data(0) == q.zero_point.data<std::int32_t>()[0]);
  CHECK(initializer(model, "per_channel.scale") != nullptr);
  Observed off;
  off.act.disable_fake_quant();
  off.per_channel.disable_fake_quant();
  const auto identity = tmod::onnx::to_onnx(tmod::trace_module(off, input), {.opset = 13});
  for (const auto& n : identity.graph().node()) CHECK(n.op_type() == "Identity");
}

TEST_CASE("onnx: fake_quantize exports as QuantizeLinear and DequantizeLinear") {
  Quantized net;
  const auto model = tmod::onnx::to_onnx(tmod::trace_module(net, input), {.opset = 13});
  CHECK_NOTHROW(proto::checker::check_model(model));
  std::map<std::string, int> counts;
  std::vector<const proto::NodeProto*> quantize;
  for (const auto& n : model.graph().node()) {
    ++counts[n.op_type()];
    if (n.op_type() == "QuantizeLinear") quantize.push_back(&n);
  }
  CHECK(counts["QuantizeLinear"] == 2);
  CHECK(counts["DequantizeLinear"] == 2);
  CHECK(counts["Cast"] == 1);  // the per-channel zero points, int32 -> uint8
  REQUIRE(quantize.size() == 2);
  const proto::TensorProto* zp = initializer(model, quantize[0]->input(2));
  REQUIRE(zp != nullptr);
  CHECK(zp->data_type() == proto::TensorProto::INT8);
  CHECK(zp->dims_size() == 0);
  CHECK(zp->int32_data(0) == 3);
  REQUIRE(quantize[1]->attribute_size() == 1);
  CHECK(quantize[1]->attribute(0).name() == "axis");
  CHECK(quantize[1]->attribute(0).i() == 1);

  net.quant_min = -127;  // qint8_narrow: QuantizeLinear saturates to [-128, 127] only
  const tmod::TracedModule narrow = tmod::trace_module(net, input);
  try {
    (void)tmod::onnx::to_onnx(narrow, {.opset = 13});
    FAIL("exported a [-127, 127] fake quantization");
  } catch (const tmod::value_error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find("nn.fake_quantize") != std::string::npos);
    CHECK(what.find("[-127, 127]") != std::string::npos);
  }
}

}  // namespace tmod_test_onnx_fake_quantize
