// Observers and fake quantization against PyTorch 1.13 (tests/data/quant, written by
// tests/reference/gen_goldens.py): each observer fed the same batches states the same scale (bits)
// and zero point; fake_quantize computes PyTorch's bits. Then the bad inputs.
#include "golden.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/fake_quantize.hpp>
#include <tracemod/quant.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

namespace tmod_test_nn_quant_goldens {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace Q = tracemod::quant;
using tmod::Tensor;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

/// Feeds the case's batches to `o` and compares its qparams with PyTorch's.
void check_observer(Q::Observer& o, const std::string& name) {
  CAPTURE(name);
  const std::string key = "quant/" + name;
  const auto batches = golden::inputs(key);
  REQUIRE(!batches.empty());
  for (const Tensor& b : batches) o.observe(b);
  const Q::QParamsTensors q = o.calculate_qparams();
  const Tensor scale = golden::load(key, "scale"), zero_point = golden::load(key, "zero_point");
  REQUIRE(q.scale.shape() == scale.shape());
  REQUIRE(q.zero_point.shape() == zero_point.shape());
  for (std::int64_t c = 0; c < scale.numel(); ++c) {
    CAPTURE(c);
    CHECK(q.scale.data<float>()[c] == scale.data<float>()[c]);
    CHECK(static_cast<float>(q.zero_point.data<std::int32_t>()[c]) == zero_point.data<float>()[c]);
  }
}

const Q::QScheme quint8_affine{.dtype = Q::QuantDType::quint8()};
const Q::QScheme qint8_symmetric{.dtype = Q::QuantDType::qint8(), .mode = Q::QMode::symmetric};

}  // namespace

TEST_CASE("quant: MinMaxObserver and MovingAverageMinMaxObserver state PyTorch's qparams") {
  Q::MinMaxObserver a(quint8_affine);
  check_observer(a, "minmax_affine_quint8");
  Q::MinMaxObserver b(qint8_symmetric);
  check_observer(b, "minmax_symmetric_qint8");
  Q::MinMaxObserver c({.dtype = Q::QuantDType::qint8(true)});
  check_observer(c, "minmax_affine_qint8_reduce");
  Q::MinMaxObserver d({.dtype = Q::QuantDType::quint8(), .mode = Q::QMode::symmetric});
  check_observer(d, "minmax_symmetric_quint8");
  Q::MinMaxObserver e(quint8_affine);
  check_observer(e, "minmax_positive");
  Q::MovingAverageMinMaxObserver f(quint8_affine);
  check_observer(f, "moving_average");
  Q::MovingAverageMinMaxObserver g(qint8_symmetric, 0.1f);
  check_observer(g, "moving_average_symmetric_qint8");
}

TEST_CASE("quant: PerChannelMinMaxObserver states PyTorch's qparams per channel") {
  Q::PerChannelMinMaxObserver a({.dtype = Q::QuantDType::qint8(), .mode = Q::QMode::symmetric, .per_channel = true});
  check_observer(a, "per_channel_symmetric_qint8");
  Q::PerChannelMinMaxObserver b({.dtype = Q::QuantDType::quint8(), .per_channel = true, .axis = 1});
  check_observer(b, "per_channel_affine_quint8_axis1");
  CHECK(b.min_vals().size() == 4);
}

TEST_CASE("quant: HistogramObserver's L2 search picks PyTorch's range") {
  Q::HistogramObserver a(quint8_affine);
  check_observer(a, "histogram");
  CHECK(a.histogram().size() == 2048);
  CHECK(a.min_val() == -3.f);
  CHECK(a.max_val() == 5.f);
  CHECK(a.qparams().scale < 8.f / 255.f);  // the search dropped the top bin, as PyTorch's
  Q::HistogramObserver b(qint8_symmetric);
  check_observer(b, "histogram_symmetric_qint8");
  Q::HistogramObserver c(quint8_affine);
  check_observer(c, "histogram_batches");  // re-binned onto [-4, 2], then a batch added bin by bin
  CHECK(c.min_val() == -4.f);
  CHECK(c.max_val() == 2.f);
  const Tensor h = golden::load("quant/histogram_batches", "histogram");
  REQUIRE(h.numel() == 2048);
  for (std::size_t i = 0; i < 2048; ++i) {
    CAPTURE(i);
    CHECK(c.histogram()[i] == doctest::Approx(h.data<float>()[i]).epsilon(1e-5));
  }
}

TEST_CASE("quant: HistogramObserver re-bins onto a wider range and keeps the total count") {
  Q::HistogramObserver o(quint8_affine);
  o.observe(tmod::uniform({1000}, -1.f, 1.f, 11));
  o.observe(tmod::uniform({500}, -3.f, 2.f, 12));
  o.observe(tmod::uniform({300}, -0.5f, 0.5f, 13));  // inside: summed bin by bin
  double total = 0;
  for (float h : o.histogram()) total += h;
  CHECK(total == doctest::Approx(1800).epsilon(1e-6));
  CHECK(o.min_val() <= -2.9f);
  CHECK(o.max_val() >= 1.9f);
  const Q::ScaleZeroPoint q = o.qparams();
  CHECK(q.scale > 0.f);
  CHECK(q.scale <= 5.1f / 255.f);
}

TEST_CASE("quant: fake_quantize computes PyTorch's bits, per tensor and per channel") {
  struct Case {
    const char* name;
    double scale;
    std::int64_t zero_point, quant_min, quant_max;
  };
  for (const Case& c : {Case{"fake_quantize_qint8", 0.1, 3, -128, 127}, Case{"fake_quantize_quint8", 0.023529412, 128, 0, 255},
                        Case{"fake_quantize_narrow", 0.0625, 0, -127, 127}}) {
    CAPTURE(c.name);
    const std::string key = std::string("quant/") + c.name;
    const Tensor y = F::fake_quantize(golden::load(key, "in0"), c.scale, c.zero_point, c.quant_min, c.quant_max);
    CHECK(same_bits(y, golden::load(key, "out")));
  }
  const auto in = golden::inputs("quant/fake_quantize_per_channel");
  REQUIRE(in.size() == 3);
  Tensor zp = Tensor::empty({3}, tmod::DType::int32);
  for (int k = 0; k < 3; ++k) zp.data<std::int32_t>()[k] = static_cast<std::int32_t>(in[2].data<float>()[k]);
  const Tensor y = F::fake_quantize_per_channel(in[0], in[1], zp, 1, -128, 127);
  CHECK(same_bits(y, golden::load("quant/fake_quantize_per_channel", "out")));
  // the same channel-by-channel through the per-tensor op (axis -3 is axis 1 of a rank-4 input)
  const Tensor z = F::fake_quantize_per_channel(in[0], in[1], zp, -3, -128, 127);
  CHECK(same_bits(z, y));
}

TEST_CASE("quant: calculate_qparams by hand: widening to zero, eps, symmetric zero points") {
  const Q::ScaleZeroPoint a = Q::calculate_qparams(1.f, 3.f, quint8_affine);  // [0, 3]
  CHECK(a.scale == 3.f / 255.f);
  CHECK(a.zero_point == 0);
  const Q::ScaleZeroPoint b = Q::calculate_qparams(0.f, 0.f, qint8_symmetric);
  CHECK(b.scale == Q::qparams_eps);
  CHECK(b.zero_point == 0);
  const Q::ScaleZeroPoint c = Q::calculate_qparams(-2.f, 1.f, {.dtype = Q::QuantDType::quint8(), .mode = Q::QMode::symmetric});
  CHECK(c.scale == 2.f / 127.5f);
  CHECK(c.zero_point == 128);
  const Q::ScaleZeroPoint d = Q::calculate_qparams(-1.f, 1.f, {.dtype = Q::QuantDType::qint8_narrow(), .mode = Q::QMode::symmetric});
  CHECK(d.scale == 1.f / 127.f);
  const Q::ScaleZeroPoint e = Q::calculate_qparams(-3.f, 1.f, quint8_affine);
  CHECK(e.zero_point == 191);  // 0 - round(-3 / (4/255)) = round(191.25)
}

TEST_CASE("quant: bad input is a value_error naming the op or observer, state unchanged") {
  const Tensor x = tmod::uniform({2, 3}, -1.f, 1.f, 7);
  const auto fails_with = [](auto&& f, const std::string& needle) {
    try {
      f();
    } catch (const tmod::value_error& e) {
      const std::string what = e.what();
      CAPTURE(what);
      CHECK(what.find(needle) != std::string::npos);
      return;
    }
    FAIL("no value_error for " << needle);
  };
  fails_with([&] { (void)F::fake_quantize(x, 0.0, 0, -128, 127); }, "nn.fake_quantize: scale is 0");
  fails_with([&] { (void)F::fake_quantize(x, -0.5, 0, -128, 127); }, "scale is -0.5");
  fails_with([&] { (void)F::fake_quantize(x, 0.1, 200, -128, 127); }, "zero_point is 200, outside [-128, 127]");
  fails_with([&] { (void)F::fake_quantize(x, 0.1, 0, 5, 5); }, "quant_min 5 must be below quant_max 5");
  Tensor scale = tmod::ones({3});
  scale.data<float>()[1] = 0.f;
  const Tensor zp = tmod::zeros({3}, tmod::DType::int32);
  fails_with([&] { (void)F::fake_quantize_per_channel(x, scale, zp, 1, -128, 127); },
             "nn.fake_quantize_per_channel: scale[1] is 0");
  CHECK_THROWS_AS((void)F::fake_quantize_per_channel(x, tmod::ones({2}), zp, 1, -128, 127), tmod::shape_error);

  Q::MinMaxObserver o;
  fails_with([&] { (void)o.qparams(); }, "MinMaxObserver: qparams() before any observation");
  o.observe(tmod::zeros({0, 4}));
  fails_with([&] { (void)o.qparams(); }, "before any observation");
  Q::PerChannelMinMaxObserver p;
  fails_with([&] { (void)p.qparams(); }, "PerChannelMinMaxObserver: qparams() before any observation");
  p.observe(x);
  fails_with([&] { p.observe(tmod::ones({3, 3})); }, "3 channels on axis 0, but 2 were observed before");
  o.observe(x);
  const Q::ScaleZeroPoint before = o.qparams();
  Tensor nan = tmod::ones({2});
  nan.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  fails_with([&] { o.observe(nan); }, "MinMaxObserver: the observed tensor holds NaN at element 1");
  CHECK(o.qparams() == before);
  fails_with([&] { Q::MinMaxObserver bad({.dtype = {"q", 3, 3, true}}); }, "MinMaxObserver: quant_min 3 must be below quant_max 3");
  o.reset();
  CHECK_FALSE(o.observed());
}

}  // namespace tmod_test_nn_quant_goldens
