// M::FakeQuantize and the QConfig presets: forward observes then fake-quantizes (against the
// observer's qparams and F::fake_quantize run by hand), the enabled flags, and the fake_quantize ops
// traced, printed, run by the interpreter and through save -> load, each against the eager run.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/quant.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <sstream>
#include <string>

namespace tmod_test_nn_quant_module {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
namespace Q = tracemod::quant;
using tmod::Tensor;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

tmod::TracedModule round_trip(const tmod::TracedModule& m) {
  std::ostringstream os;
  tmod::save(m, os);
  const std::string bytes = os.str();
  return tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

std::string text(const tmod::TracedModule& m) {
  std::ostringstream os;
  os << m.graph();
  return os.str();
}

struct Quantized : tmod::Module {
  Tensor scale = tmod::tensor({0.05f, 0.1f, 0.02f});
  Tensor zero_point = tmod::zeros({3}, tmod::DType::int32);
  TM_MODULE(Quantized)
  auto forward(const auto& x) const {
    const auto a = F::fake_quantize(F::relu(x), 0.03125, 3, -128, 127);
    return F::fake_quantize_per_channel(a - 0.5f, scale, zero_point, 1, 0, 255);
  }
};

const Tensor input = tmod::uniform({2, 3, 4, 5}, -2.f, 2.f, 91);

struct Observed : tmod::Module {
  M::FakeQuantize fq;
  explicit Observed(const M::FakeQuantize& f = Q::min_max_fakequant_qconfig.activation()) : fq(f) {}
  TM_MODULE(Observed, fq)
  auto forward(const auto& x) const { return fq(x); }
};

}  // namespace

TEST_CASE("quant: FakeQuantize observes, then fake-quantizes with the observer's qparams") {
  M::FakeQuantize fq = Q::min_max_fakequant_qconfig.activation();
  const Tensor a = tmod::uniform({4, 6}, -1.f, 3.f, 1), b = tmod::uniform({4, 6}, -2.f, 1.f, 2);
  (void)fq(a);
  const Tensor y = fq(b);
  Q::MinMaxObserver o({.dtype = Q::QuantDType::qint8(), .mode = Q::QMode::symmetric});
  o.observe(a);
  o.observe(b);
  const Q::ScaleZeroPoint q = o.qparams();
  CHECK(q.zero_point == 0);
  CHECK(same_bits(y, F::fake_quantize(b, q.scale, q.zero_point, -128, 127)));

  fq.disable_observer();
  const Tensor wide = tmod::uniform({4, 6}, -9.f, 9.f, 3);
  CHECK(same_bits(fq(wide), F::fake_quantize(wide, q.scale, q.zero_point, -128, 127)));  // qparams unchanged
  fq.disable_fake_quant();
  CHECK(same_bits(fq(wide), wide));

  const M::FakeQuantize calibration = Q::calibration_qconfig.activation();
  CHECK_FALSE(calibration.fake_quant_enabled);
  CHECK(calibration.observer().name() == "HistogramObserver");
  const M::FakeQuantize weight = Q::ema_fakequant_qconfig.weight();
  CHECK(weight.observer().scheme().dtype == Q::QuantDType::qint8_narrow());
  const M::FakeQuantize activation = Q::ema_fakequant_qconfig.activation();  // owns the observer read below
  const auto* ema = dynamic_cast<const Q::MovingAverageMinMaxObserver*>(&activation.observer());
  REQUIRE(ema != nullptr);
  CHECK(ema->averaging_constant() == 0.1f);
}

TEST_CASE("quant: a per-channel FakeQuantize fake-quantizes each channel with its own qparams") {
  M::FakeQuantize fq(std::make_unique<Q::PerChannelMinMaxObserver>(
      Q::QScheme{.dtype = Q::QuantDType::qint8_narrow(), .mode = Q::QMode::symmetric, .per_channel = true, .axis = 1}));
  const Tensor y = fq(input);
  const auto& o = static_cast<const Q::PerChannelMinMaxObserver&>(fq.observer());
  const Q::QParamsTensors q = o.qparams();
  CHECK(q.scale.shape() == tmod::Shape{3});
  CHECK(same_bits(y, F::fake_quantize_per_channel(input, q.scale, q.zero_point, 1, -127, 127)));
}

TEST_CASE("trace: fake_quantize prints as its call and runs as traced and loaded") {
  Quantized net;
  const Tensor eager = net.forward(input);
  const tmod::TracedModule m = tmod::trace_module(net, input);
  const std::string printed = text(m);
  CAPTURE(printed);
  CHECK(printed.find("nn.fake_quantize(") != std::string::npos);
  CHECK(printed.find("0.03125, 3, -128, 127") != std::string::npos);
  CHECK(printed.find("nn.fake_quantize_per_channel(") != std::string::npos);
  CHECK(same_bits(m(input).tensor(), eager));
  const tmod::TracedModule loaded = round_trip(m);
  CHECK(text(loaded) == printed);
  CHECK(same_bits(loaded(input).tensor(), eager));
}

TEST_CASE("trace: FakeQuantize is a builtin module call that observes when run, and loads with its state") {
  Observed m;
  const tmod::TracedModule t = tmod::trace_module(m, input);  // tracing runs forward: fq observes input
  CHECK(m.fq.observer().observed());
  CHECK(text(t).find("fq = getattr(self, \"fq\") -> (FakeQuantize)") != std::string::npos);
  CHECK(text(t).find("fq_out = fq(x, )") != std::string::npos);
  const Tensor eager = m(input);  // observes, then fake-quantizes
  const Tensor traced = t(input).tensor();
  CHECK(same_bits(traced, eager));  // the traced call observed the same batch
  const auto& fq = t.getattr("fq").as<M::FakeQuantize>();
  CHECK(fq.calculate_qparams().scale.item<float>() == m.fq.calculate_qparams().scale.item<float>());
  const tmod::TracedModule loaded = round_trip(t);
  const auto& lfq = loaded.getattr("fq").as<M::FakeQuantize>();
  CHECK(lfq.observer().name() == "MinMaxObserver");
  CHECK(lfq.observer().state() == fq.observer().state());
  CHECK(lfq.observer().scheme() == fq.observer().scheme());
  CHECK(same_bits(loaded(input).tensor(), eager));

  Observed per_channel(M::FakeQuantize(std::make_unique<Q::PerChannelMinMaxObserver>(
      Q::QScheme{.dtype = Q::QuantDType::qint8(), .mode = Q::QMode::symmetric, .per_channel = true, .axis = 1})));
  const Tensor expected = per_channel(input);
  per_channel.fq.disable_observer();
  const tmod::TracedModule p = tmod::trace_module(per_channel, input);
  CHECK(same_bits(p(input).tensor(), expected));
  CHECK(same_bits(round_trip(p)(input).tensor(), expected));
  per_channel.fq.disable_fake_quant();  // runs as the identity
  CHECK(same_bits(tmod::trace_module(per_channel, input)(input).tensor(), input));

  Observed histogram(Q::calibration_qconfig.activation());
  (void)histogram(input);
  const tmod::TracedModule h = round_trip(tmod::trace_module(histogram, input));
  CHECK(h.getattr("fq").as<M::FakeQuantize>().observer().state() == histogram.fq.observer().state());
  CHECK_FALSE(h.getattr("fq").as<M::FakeQuantize>().fake_quant_enabled);
}

}  // namespace tmod_test_nn_quant_module
