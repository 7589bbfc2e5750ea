// quant::prepare on the width-8 ResNet-18 of tests/data/resnet18 against PyTorch FX: the same
// post-training static quantization (MinMax quint8 affine activations, per-channel symmetric qint8
// weights, BN folded; calibrated and measured on input.npy) reaches the same fake-quantized SQNR
// against float as prepare_fx + convert_to_reference_fx (tests/reference/gen_goldens.py, ptq_sqnr).
// One traced ResNet-18 at width 8 on 2x3x48x48: a few milliseconds of compute.
#include <model_goldens.hpp>
#include <models/resnet.hpp>
#include <tracemod/quant.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <string>

namespace tmod_test_nn_quant_resnet {

namespace {

namespace tmod = tracemod;
namespace Q = tracemod::quant;

/// 10 log10(sum ref^2 / sum (ref - y)^2), in double.
double sqnr(const tmod::Tensor& ref, const tmod::Tensor& y) {
  double signal = 0, noise = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.data<float>()[i], d = r - y.data<float>()[i];
    signal += r * r;
    noise += d * d;
  }
  return 10 * std::log10(signal / noise);
}

// PyTorch 1.13, onednn, printed by `gen_goldens.py ptq_sqnr` for this network and input.
constexpr double torch_fake_quant_sqnr = 24.31;

}  // namespace

TEST_CASE("quant::prepare: ResNet-18 (width 8) fake-quantized SQNR matches PyTorch FX's post-training quantization") {
  const auto dir = golden::data_dir() / "resnet18";
  const tmod::Tensor x = tmod::io::load_npy(dir / "input.npy");
  models::ResNet net(10, 8);
  REQUIRE(net.load_state_dict(golden::model_state_dict("resnet18")).empty());
  net.eval();
  const tmod::Tensor reference = net(x);

  const Q::QConfig ptq{
      .weight_observer = {.kind = Q::ObserverKind::per_channel_min_max,
                          .scheme = {.dtype = Q::QuantDType::qint8(), .mode = Q::QMode::symmetric, .per_channel = true}},
      .act_observer = {.kind = Q::ObserverKind::min_max, .scheme = {.dtype = Q::QuantDType::quint8()}}};
  tmod::TracedModule prepared = Q::prepare(tmod::trace_module(net, x), ptq);
  Q::disable_fake_quant(prepared);  // calibration observes float activations, as prepare_fx's observers
  const tmod::Tensor calibrated = prepared(x).tensor();
  CHECK(sqnr(reference, calibrated) > 80);  // BN folding alone: float rounding
  Q::enable_fake_quant(prepared);
  Q::disable_observer(prepared);
  const double ours = sqnr(reference, prepared(x).tensor());
  MESSAGE("tracemod fake-quantized SQNR " << ours << " dB, PyTorch " << torch_fake_quant_sqnr << " dB");
  CHECK(std::abs(ours - torch_fake_quant_sqnr) < 0.5);
  // The observed activations: the input, 20 convs (after the relu where one follows; the second conv
  // of each block and each downsample conv feed an add), 8 add + relu, fc.
  CHECK(Q::qparams_of(prepared).size() == 1 + 20 + 8 + 1);
}

}  // namespace tmod_test_nn_quant_resnet
