// quant::prepare on the width-8 ResNet-18 of tests/data/resnet18 against PyTorch FX's
// post-training static quantization (MinMax quint8 affine activations, per-channel symmetric qint8
// weights, BN folded; calibrated and measured on input.npy; numbers from PyTorch 1.13 via
// prepare_fx + convert_to_reference_fx, tests/reference/gen_goldens.py ptq_sqnr): the observed
// activation qparams are PyTorch's, and so are the SQNRs against float of fake-quantizing the
// weights alone and the activations alone. (PyTorch's reference model also re-quantizes the
// adaptive-avg-pool output with its input's qparams, which tracemod does not: the activation-only
// number is PyTorch's with that quantize bypassed.)
// One traced ResNet-18 at width 8 on 2x3x48x48: a few milliseconds of compute.
#include <model_goldens.hpp>
#include <models/resnet.hpp>
#include <tracemod/quant.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <iterator>
#include <utility>
#include <vector>
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

// PyTorch 1.13, onednn, for this network and input: the fake-quantized model (printed by
// `gen_goldens.py ptq_sqnr`), its weights alone, its activations alone without the avgpool re-quantize.
constexpr double torch_fake_quant_sqnr = 24.31;
constexpr double torch_weight_only_sqnr = 31.436;
constexpr double torch_activation_only_sqnr = 25.390;
// The same model converted to int8 (convert_fx, onednn).
constexpr double torch_converted_sqnr = 24.59;
// PyTorch's observers in graph order (activation_post_process_0 ... _32 less the shared ones).
constexpr std::pair<float, int> torch_qparams[] = {
    {0.03220227f, 130}, {0.01756943f, 0}, {0.01775613f, 0}, {0.04011340f, 134}, {0.02257535f, 0}, {0.01932580f, 0},
    {0.04774236f, 142}, {0.03402644f, 0}, {0.01814388f, 0}, {0.04932193f, 138}, {0.03593656f, 124}, {0.03097863f, 0},
    {0.02669022f, 0}, {0.06486002f, 151}, {0.03390548f, 0}, {0.02398289f, 0}, {0.05765465f, 140}, {0.04858694f, 141},
    {0.03467959f, 0}, {0.01930990f, 0}, {0.04954775f, 99}, {0.03608543f, 0}, {0.02843006f, 0}, {0.05143248f, 126},
    {0.06243141f, 144}, {0.03479444f, 0}, {0.03253117f, 0}, {0.06132994f, 112}, {0.04486915f, 0}, {0.01032013f, 159}};

/// Fake quantization on for the weight (per-channel) FakeQuantize modules or for the activation ones.
void fake_quantize_only(tmod::Module& m, bool weights) {
  for (tmod::Module& child : m.modules())
    if (auto* fq = dynamic_cast<tmod::nn::FakeQuantize*>(&child))
      fq->enable_fake_quant(fq->observer().scheme().per_channel == weights);
}

const Q::QConfig ptq{
    .weight_observer = {.kind = Q::ObserverKind::per_channel_min_max,
                        .scheme = {.dtype = Q::QuantDType::qint8(), .mode = Q::QMode::symmetric, .per_channel = true}},
    .act_observer = {.kind = Q::ObserverKind::min_max, .scheme = {.dtype = Q::QuantDType::quint8()}}};

}  // namespace

TEST_CASE("quant::prepare: ResNet-18 (width 8) observes PyTorch FX's qparams; weight and activation fake quantization match its SQNR") {
  const auto dir = golden::data_dir() / "resnet18";
  const tmod::Tensor x = tmod::io::load_npy(dir / "input.npy");
  models::ResNet net(10, 8);
  REQUIRE(net.load_state_dict(golden::model_state_dict("resnet18")).empty());
  net.eval();
  const tmod::Tensor reference = net(x);

  tmod::TracedModule prepared = Q::prepare(tmod::trace_module(net, x), ptq);
  Q::disable_fake_quant(prepared);  // calibration observes float activations, as prepare_fx's observers
  const tmod::Tensor calibrated = prepared(x).tensor();
  CHECK(sqnr(reference, calibrated) > 80);  // BN folding alone: float rounding
  Q::disable_observer(prepared);
  // The observed activations: the input, 20 convs (after the relu where one follows; the second conv
  // of each block and each downsample conv feed an add), 8 add + relu, fc; each with PyTorch's qparams
  // (PyTorch orders a block's downsample observer after its conv2's; tracemod runs the downsample
  // call after conv2 too).
  const std::vector<Q::ObservedTensor> observed = Q::qparams_of(prepared);
  REQUIRE(observed.size() == std::size(torch_qparams));
  for (std::size_t i = 0; i < observed.size(); ++i) {
    CAPTURE(i);
    CHECK(observed[i].qparams.scale == doctest::Approx(torch_qparams[i].first).epsilon(1e-5));
    CHECK(observed[i].qparams.zero_point == torch_qparams[i].second);
  }
  fake_quantize_only(prepared, true);
  CHECK(sqnr(reference, prepared(x).tensor()) == doctest::Approx(torch_weight_only_sqnr).epsilon(1e-3));
  fake_quantize_only(prepared, false);
  CHECK(sqnr(reference, prepared(x).tensor()) == doctest::Approx(torch_activation_only_sqnr).epsilon(1e-3));
  Q::enable_fake_quant(prepared);
  const double both = sqnr(reference, prepared(x).tensor());
  MESSAGE("fake-quantized SQNR: tracemod " << both << " dB, PyTorch " << torch_fake_quant_sqnr << " dB");
  CHECK(both > 20);
}

TEST_CASE("quant::convert: ResNet-18 (width 8) in int8 keeps the fake-quantized SQNR; PyTorch's convert_fx for scale") {
  const auto dir = golden::data_dir() / "resnet18";
  const tmod::Tensor x = tmod::io::load_npy(dir / "input.npy");
  models::ResNet net(10, 8);
  REQUIRE(net.load_state_dict(golden::model_state_dict("resnet18")).empty());
  net.eval();
  const tmod::Tensor reference = net(x);
  tmod::TracedModule prepared = Q::prepare(tmod::trace_module(net, x), ptq);
  Q::disable_fake_quant(prepared);
  (void)prepared(x);
  Q::enable_fake_quant(prepared);
  Q::disable_observer(prepared);
  const tmod::TracedModule converted = Q::convert(prepared);
  const double fake = sqnr(reference, prepared(x).tensor()), int8 = sqnr(reference, converted(x).tensor());
  MESSAGE("SQNR: tracemod fake-quantized " << fake << " dB, int8 " << int8 << " dB; PyTorch int8 " << torch_converted_sqnr
                                           << " dB");
  // The int8 graph re-quantizes the averaged pooling output for fc (as PyTorch's does), which the
  // fake-quantized graph does not; the rest differs by roundings of values within a half level.
  CHECK(int8 == doctest::Approx(fake).epsilon(0.05));
  CHECK(int8 > 20);
}

}  // namespace tmod_test_nn_quant_resnet
