// Post-training quantization of torchvision's ResNet-18, as PyTorch FX does it: trace, prepare
// (BN folded; MinMax quint8 affine activations, per-channel symmetric qint8 weights), calibrate on
// 8 batches with fake quantization off, then compare the fake-quantized forward and the int8 module
// Q::convert makes of it with float (SQNR over the 8 batches), and save the prepared, calibrated
// module and the int8 one.
//
//   cd / && /usr/bin/python3 tests/reference/gen_goldens.py ptq_sqnr /tmp/ptq_resnet18
//   ./build/dev/examples/quantize_resnet /tmp/ptq_resnet18 [/tmp/resnet18_prepared.tmod [/tmp/resnet18_int8.tmod]]
//
// The script writes the network's state_dict and the batches, and prints PyTorch's SQNR for the
// same weights and batches. Without a directory the example runs on random weights and batches.
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/io/npy.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/quant.hpp>
#include <tracemod/traced_module.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

namespace tmod = tracemod;
namespace Q = tracemod::quant;

namespace {

struct Sums {
  double signal = 0, noise = 0;
  void add(const tmod::Tensor& ref, const tmod::Tensor& y) {
    for (std::int64_t i = 0; i < ref.numel(); ++i) {
      const double r = ref.data<float>()[i], d = r - y.data<float>()[i];
      signal += r * r;
      noise += d * d;
    }
  }
  [[nodiscard]] double sqnr() const { return 10 * std::log10(signal / noise); }
};

}  // namespace

int main(int argc, char** argv) {
  models::ResNet net = models::resnet18();
  std::vector<tmod::Tensor> batches;
  if (argc > 1) {
    const std::filesystem::path dir = argv[1];
    tmod::StateDict state;
    // num_batches_tracked is not used in eval mode (and the script writes it as float32).
    for (const auto& [key, value] : net.state_dict())
      state.insert(key, key.ends_with("num_batches_tracked") ? value : tmod::io::load_npy(dir / (key + ".npy")));
    if (!net.load_state_dict(state).empty()) return std::fprintf(stderr, "state_dict does not match\n"), 1;
    for (int i = 0; i < 8; ++i) batches.push_back(tmod::io::load_npy(dir / ("batch" + std::to_string(i) + ".npy")));
  } else {
    for (int i = 0; i < 8; ++i) batches.push_back(tmod::randn({2, 3, 224, 224}, 100 + i));
  }
  net.eval();

  const Q::QConfig ptq{
      .weight_observer = {.kind = Q::ObserverKind::per_channel_min_max,
                          .scheme = {.dtype = Q::QuantDType::qint8(), .mode = Q::QMode::symmetric, .per_channel = true}},
      .act_observer = {.kind = Q::ObserverKind::min_max, .scheme = {.dtype = Q::QuantDType::quint8()}}};
  tmod::TracedModule prepared = Q::prepare(tmod::trace_module(net, batches.front()), ptq);
  Q::disable_fake_quant(prepared);
  for (const tmod::Tensor& b : batches) (void)prepared(b);
  Q::enable_fake_quant(prepared);
  Q::disable_observer(prepared);

  const tmod::TracedModule int8 = Q::convert(prepared);
  Sums fake, converted;
  for (const tmod::Tensor& b : batches) {
    const tmod::Tensor reference = net(b);
    fake.add(reference, prepared(b).tensor());
    converted.add(reference, int8(b).tensor());
  }
  std::printf("ResNet-18, %zu calibration batches: SQNR against float, fake-quantized %.2f dB, int8 %.2f dB\n",
              batches.size(), fake.sqnr(), converted.sqnr());
  const std::size_t observed = Q::qparams_of(prepared).size();
  std::printf("%zu observed activations; layer1.0 after annotate_qparams:\n", observed);
  Q::annotate_qparams(prepared);
  std::printf("%s\n", tmod::graph::to_string(prepared.getattr("layer1.0").as<tmod::TracedModule>().graph()).c_str());
  std::printf("layer1.0's first conv in the int8 graph:\n");
  std::istringstream lines(tmod::graph::to_string(int8.graph()));
  for (std::string line; std::getline(lines, line);)
    if (line.find("layer1__0_conv1") != std::string::npos) std::printf("%s\n", line.c_str());
  if (argc > 2) {
    tmod::save(prepared, std::filesystem::path(argv[2]));
    std::printf("saved to %s\n", argv[2]);
  }
  if (argc > 3) {
    tmod::save(int8, std::filesystem::path(argv[3]));
    std::printf("int8 module saved to %s\n", argv[3]);
  }
  return 0;
}
