// Quantized tensors and int8 ops, and quant::convert: uint8 / int8 tensors (astype, save -> load),
// quantize / dequantize against a scalar loop (ties, clamping, NaN), quantized_conv2d /
// quantized_linear against a scalar integer reference with the same rounding (strides, padding,
// dilation, groups, depthwise, relu / relu6), quantized_add against dequantize-add-quantize, the
// converted small network against its fake-quantized graph, save -> load, and bad input.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/npy.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/quant.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace tmod_test_nn_quant_convert {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
namespace Q = tracemod::quant;
using tmod::Tensor;

std::string text(const tmod::TracedModule& m) {
  std::ostringstream os;
  for (const auto* g : m.graph().graphs(true)) os << *g << "\n";
  return os.str();
}

tmod::TracedModule round_trip(const tmod::TracedModule& m) {
  std::ostringstream os;
  tmod::save(m, os);
  const std::string bytes = os.str();
  return tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

template <class T>
Tensor random_ints(const tmod::Shape& s, int lo, int hi, std::uint32_t seed) {
  const Tensor u = tmod::uniform(s, 0.f, 1.f, seed);
  Tensor t = Tensor::empty(s, tmod::dtype_of_v<T>);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data<T>()[i] = static_cast<T>(lo + std::min(hi - lo, static_cast<int>(u.data<float>()[i] * float(hi - lo + 1))));
  return t;
}

// The requantization every int8 layer applies, written out: clamp(nearbyint(float(raw) * m) + z).
std::uint8_t requantize(std::int64_t raw, float m, std::int32_t z, std::int32_t qmin, std::int32_t qmax) {
  const float v = std::nearbyint(static_cast<float>(raw) * m) + static_cast<float>(z);
  return static_cast<std::uint8_t>(std::clamp(static_cast<std::int32_t>(v), qmin, qmax));
}

struct conv_case {
  std::int64_t n, c, h, w, k, r, s, stride, pad, dil, groups;
  std::string mode;
};

Tensor conv_reference(const conv_case& cc, const Tensor& x, const Tensor& w, const Tensor& ws, const Tensor& b,
                      const F::quantized_conv2d_params& p) {
  const std::int64_t oh = (cc.h + 2 * cc.pad - cc.dil * (cc.r - 1) - 1) / cc.stride + 1;
  const std::int64_t ow = (cc.w + 2 * cc.pad - cc.dil * (cc.s - 1) - 1) / cc.stride + 1;
  const std::int64_t cg = cc.c / cc.groups, kg = cc.k / cc.groups;
  Tensor y = Tensor::empty({cc.n, cc.k, oh, ow}, tmod::uint8);
  const auto z_in = static_cast<std::int32_t>(p.in_zero_point), z = static_cast<std::int32_t>(p.zero_point);
  const auto s_out = static_cast<float>(p.scale);
  const std::int32_t qmin = cc.mode == "identity" ? 0 : z;
  const std::int32_t qmax =
      cc.mode == "relu6" ? std::min(255, z + static_cast<std::int32_t>(std::nearbyint(6.f * (1.f / s_out)))) : 255;
  for (std::int64_t n = 0; n < cc.n; ++n)
    for (std::int64_t k = 0; k < cc.k; ++k)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          std::int64_t raw = b.data<std::int32_t>()[k];
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t r = 0; r < cc.r; ++r)
              for (std::int64_t s = 0; s < cc.s; ++s) {
                const std::int64_t ih = i * cc.stride - cc.pad + r * cc.dil, iw = j * cc.stride - cc.pad + s * cc.dil;
                const std::int64_t ch = (k / kg) * cg + c;
                const std::int32_t xv = ih >= 0 && ih < cc.h && iw >= 0 && iw < cc.w
                                            ? x.data<std::uint8_t>()[((n * cc.c + ch) * cc.h + ih) * cc.w + iw]
                                            : z_in;
                raw += (xv - z_in) * w.data<std::int8_t>()[((k * cg + c) * cc.r + r) * cc.s + s];
              }
          const float m = static_cast<float>(p.in_scale) * ws.data<float>()[k] / s_out;
          y.data<std::uint8_t>()[((n * cc.k + k) * oh + i) * ow + j] = requantize(raw, m, z, qmin, qmax);
        }
  return y;
}

// PyTorch FX's PTQ setting: MinMax quint8 affine activations, per-channel symmetric qint8 weights.
const Q::QConfig ptq{
    .weight_observer = {.kind = Q::ObserverKind::per_channel_min_max,
                        .scheme = {.dtype = Q::QuantDType::qint8(), .mode = Q::QMode::symmetric, .per_channel = true}},
    .act_observer = {.kind = Q::ObserverKind::min_max, .scheme = {.dtype = Q::QuantDType::quint8()}}};

struct Block : tmod::Module {
  M::Conv2d conv{4, 4, 3, {.padding = 1}};
  M::ReLU relu;
  TM_MODULE(Block, conv, relu)
  auto forward(const auto& x) const { return relu(conv(x) + x); }
};

struct Net : tmod::Module {
  M::Conv2d conv1{3, 4, 3, {.padding = 1, .bias = false}};
  M::BatchNorm2d bn1{4};
  M::ReLU6 relu;
  Block block;
  M::Conv2d dw{4, 4, 3, {.stride = 2, .padding = 1, .groups = 4}};
  M::MaxPool2d pool{2};
  M::Flatten flatten{1};
  M::Linear fc{4 * 2 * 2, 5};
  TM_MODULE(Net, conv1, bn1, relu, block, dw, pool, flatten, fc)
  auto forward(const auto& x) const { return fc(flatten(pool(dw(block(relu(bn1(conv1(x)))))))); }
};

Net make_net() {
  Net n;
  n.bn1.running_mean = tmod::uniform({4}, -0.5f, 0.5f, 3);
  n.bn1.running_var = tmod::uniform({4}, 0.5f, 2.f, 4);
  n.bn1.weight = tmod::Parameter(tmod::uniform({4}, 0.5f, 1.5f, 5));
  n.bn1.bias = tmod::Parameter(tmod::uniform({4}, -0.2f, 0.2f, 6));
  n.eval();
  return n;
}

const Tensor example = tmod::uniform({2, 3, 8, 8}, -1.f, 1.f, 7);

/// The prepared net calibrated on two batches (fake quantization off), then fake-quantizing.
tmod::TracedModule calibrated(const Net& net) {
  tmod::TracedModule p = Q::prepare(tmod::trace_module(net, example), ptq);
  Q::disable_fake_quant(p);
  for (const Tensor& b : {example, tmod::uniform({2, 3, 8, 8}, -2.f, 1.5f, 8)}) (void)p(b);
  Q::enable_fake_quant(p);
  Q::disable_observer(p);
  return p;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.nbytes() == b.nbytes() &&
         tmod::visit_dtype(a.dtype(), [&]<class T>(T) { return std::memcmp(a.data<T>(), b.data<T>(), a.nbytes()) == 0; });
}

}  // namespace

TEST_CASE("uint8 and int8 tensors: names, astype, npy and save -> load round trips") {
  CHECK(tmod::itemsize(tmod::uint8) == 1);
  CHECK(tmod::itemsize(tmod::int8) == 1);
  CHECK(tmod::dtype_name(tmod::uint8) == "uint8");
  CHECK(tmod::dtype_name(tmod::int8) == "int8");
  const Tensor f = tmod::tensor({-300.f, -128.7f, -1.5f, 0.f, 2.9f, 127.f, 254.6f, 1000.f, std::nanf("")});
  const Tensor u = F::astype(f, tmod::uint8), s = F::astype(f, tmod::int8);
  const std::vector<int> want_u{0, 0, 0, 0, 2, 127, 254, 255, 0}, want_s{-128, -128, -1, 0, 2, 127, 127, 127, 0};
  for (std::size_t i = 0; i < want_u.size(); ++i) {
    CHECK(u.data<std::uint8_t>()[i] == want_u[i]);
    CHECK(s.data<std::int8_t>()[i] == want_s[i]);
  }
  CHECK(F::astype(u, tmod::float32).data<float>()[6] == 254.f);
  CHECK(F::astype(s, tmod::int32).data<std::int32_t>()[0] == -128);
  for (const Tensor& t : {u, s}) {
    const std::string bytes = tmod::io::to_npy_bytes(t);
    CHECK(bytes.find(t.dtype() == tmod::uint8 ? "'descr': '|u1'" : "'descr': '|i1'") != std::string::npos);
    CHECK(same_bytes(tmod::io::parse_npy(std::as_bytes(std::span(bytes.data(), bytes.size()))), t));
  }
  // Float-only ops name the dtype they were given.
  CHECK_THROWS_AS((void)F::relu(u), tmod::dtype_error);
  CHECK_THROWS_WITH_AS((void)F::exp(s), doctest::Contains("int8"), tmod::dtype_error);
}

TEST_CASE("quantize / dequantize: round half to even, clamping, NaN, against a scalar loop") {
  const Tensor x = tmod::tensor({0.25f, 0.75f, -0.25f, 1.25f, 3.f, -100.f, 1000.f, std::nanf(""), 0.1f, -0.6f});
  const F::quantize_params p{0.5, 3, tmod::uint8};
  const Tensor q = F::quantize(x, p);
  REQUIRE(q.dtype() == tmod::uint8);
  // x / 0.5: 0.5 -> 0 (tie to even), 1.5 -> 2, -0.5 -> -0, 2.5 -> 2, 6, clamped, clamped, NaN -> zero point
  const std::vector<int> want{3, 5, 3, 5, 9, 0, 255, 3, 3, 2};
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(q.data<std::uint8_t>()[i] == want[i]);
  const Tensor d = F::dequantize(q, F::dequantize_params{0.5, 3});
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(d.data<float>()[i] == static_cast<float>(want[i] - 3) * 0.5f);
  const Tensor r = tmod::uniform({257}, -3.f, 3.f, 11);
  const Tensor qs = F::quantize(r, F::quantize_params{0.0234, -7, tmod::int8});
  const Tensor fq = F::fake_quantize(r, 0.0234, -7, -128, 127);
  const Tensor dq = F::dequantize(qs, F::dequantize_params{0.0234, -7});
  CHECK(same_bytes(dq, fq));  // a quantize-dequantize pair is fake quantization, bit for bit
  CHECK_THROWS_WITH_AS((void)F::quantize(x, F::quantize_params{0.0, 0, tmod::uint8}), doctest::Contains("nn.quantize"),
                       tmod::value_error);
  CHECK_THROWS_AS((void)F::quantize(x, F::quantize_params{0.1, 256, tmod::uint8}), tmod::value_error);
  CHECK_THROWS_AS((void)F::quantize(x, F::quantize_params{0.1, 0, tmod::int32}), tmod::value_error);
  CHECK_THROWS_AS((void)F::quantize(q, p), tmod::dtype_error);
  CHECK_THROWS_AS((void)F::dequantize(qs, F::dequantize_params{0.1, 200}), tmod::value_error);
  CHECK_THROWS_AS((void)F::dequantize(x, F::dequantize_params{0.1, 0}), tmod::value_error);
}

TEST_CASE("quantized_conv2d against a scalar integer reference: strides, padding, dilation, groups, depthwise, relu6") {
  const std::vector<conv_case> cases{
      {2, 3, 7, 6, 5, 3, 3, 1, 1, 1, 1, "identity"}, {1, 4, 9, 9, 6, 3, 3, 2, 1, 1, 2, "relu"},
      {2, 6, 8, 7, 6, 3, 3, 1, 1, 1, 6, "relu6"},    {1, 5, 10, 8, 7, 3, 2, 1, 2, 2, 1, "relu6"},
      {1, 8, 5, 5, 16, 1, 1, 1, 0, 1, 1, "relu"},    {1, 4, 6, 6, 8, 3, 3, 2, 0, 1, 4, "identity"}};
  std::uint32_t seed = 20;
  for (const conv_case& cc : cases) {
    CAPTURE(cc.groups);
    CAPTURE(cc.mode);
    const Tensor x = random_ints<std::uint8_t>({cc.n, cc.c, cc.h, cc.w}, 0, 255, ++seed);
    const Tensor w = random_ints<std::int8_t>({cc.k, cc.c / cc.groups, cc.r, cc.s}, -127, 127, ++seed);
    const Tensor ws = tmod::uniform({cc.k}, 0.001f, 0.01f, ++seed);
    const Tensor b = random_ints<std::int32_t>({cc.k}, -5000, 5000, ++seed);
    const F::quantized_conv2d_params p{{cc.stride}, {cc.pad}, {cc.dil}, cc.groups, 0.02, 117, 0.05, 60, cc.mode};
    const Tensor y = F::quantized_conv2d(x, w, ws, b, p);
    CHECK(same_bytes(y, conv_reference(cc, x, w, ws, b, p)));
    Tensor frozen = w.clone();
    frozen.make_read_only();  // packed once and kept with the buffer: the same bits
    CHECK(same_bytes(F::quantized_conv2d(x, frozen, ws, b, p), y));
    CHECK(same_bytes(F::quantized_conv2d(x, frozen, ws, b, p), y));
  }
}

TEST_CASE("quantized_linear and quantized_add against scalar references") {
  const Tensor x = random_ints<std::uint8_t>({3, 2, 37}, 0, 255, 50);
  const Tensor w = random_ints<std::int8_t>({11, 37}, -128, 127, 51);
  const Tensor ws = tmod::uniform({11}, 0.002f, 0.02f, 52);
  const Tensor b = random_ints<std::int32_t>({11}, -3000, 3000, 53);
  const F::quantized_io p{0.03, 128, 0.2, 100, "relu"};
  const Tensor y = F::quantized_linear(x, w, ws, b, p);
  REQUIRE(y.shape() == tmod::Shape{3, 2, 11});
  for (std::int64_t row = 0; row < 6; ++row)
    for (std::int64_t j = 0; j < 11; ++j) {
      std::int64_t raw = b.data<std::int32_t>()[j];
      for (std::int64_t k = 0; k < 37; ++k)
        raw += (x.data<std::uint8_t>()[row * 37 + k] - 128) * w.data<std::int8_t>()[j * 37 + k];
      const float m = 0.03f * ws.data<float>()[j] / 0.2f;
      CHECK(y.data<std::uint8_t>()[row * 11 + j] == requantize(raw, m, 100, 100, 255));
    }
  const Tensor a = random_ints<std::uint8_t>({2, 3, 4}, 0, 255, 54), c = random_ints<std::uint8_t>({3, 1}, 0, 255, 55);
  const F::quantized_add_params ap{0.1, 20, 0.05, 200, 0.12, 30, "relu6"};
  const Tensor s = F::quantized_add(a, c, ap);
  const Tensor want = F::quantize(F::relu6(F::add(F::dequantize(a, F::dequantize_params{0.1, 20}),
                                                  F::dequantize(c, F::dequantize_params{0.05, 200}))),
                                  F::quantize_params{0.12, 30, tmod::uint8});
  CHECK(same_bytes(s, want));
  CHECK_THROWS_WITH_AS((void)F::quantized_linear(x, w, ws, b, F::quantized_io{0.03, 300, 0.2, 100, "relu"}),
                       doctest::Contains("nn.quantized_linear"), tmod::value_error);
  CHECK_THROWS_AS((void)F::quantized_linear(F::astype(x, tmod::float32), w, ws, b, p), tmod::dtype_error);
  CHECK_THROWS_AS((void)F::quantized_linear(x, w, tmod::uniform({10}, 0.1f, 0.2f, 1), b, p), tmod::shape_error);
  CHECK_THROWS_AS((void)F::quantized_add(a, c, F::quantized_add_params{0.1, 20, -1.0, 0, 0.1, 0, "identity"}),
                  tmod::value_error);
}

TEST_CASE("quant::convert: the int8 graph of a calibrated net agrees with its fake-quantized graph; save -> load") {
  const Net net = make_net();
  const tmod::TracedModule p = calibrated(net);
  const std::string before = text(p);
  const tmod::TracedModule c = Q::convert(p);
  CHECK(text(p) == before);  // the prepared module is unchanged
  const std::string printed = text(c);
  CAPTURE(printed);
  CHECK(printed.find("nn.quantize(x, ") != std::string::npos);
  CHECK(printed.find("nn.quantized_conv2d(") != std::string::npos);
  CHECK(printed.find("nn.quantized_add(") != std::string::npos);
  CHECK(printed.find("nn.quantized_linear(") != std::string::npos);
  CHECK(printed.find("nn.conv2d(") == std::string::npos);
  CHECK(printed.find("nn.linear(") == std::string::npos);
  CHECK(printed.find("relu6") != std::string::npos);  // conv1's relu6, folded into its clamp
  CHECK(printed.find("fake_quant(") == std::string::npos);
  const Tensor x = tmod::uniform({2, 3, 8, 8}, -1.5f, 1.5f, 9);
  const Tensor want = p(x).tensor(), got = c(x).tensor();
  REQUIRE(got.shape() == want.shape());
  // One level of fc's output (the graph's output is its dequantize).
  const std::vector<Q::ObservedTensor> q = Q::qparams_of(p);
  const float step = q.back().qparams.scale;
  float worst = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) worst = std::max(worst, std::abs(want.data<float>()[i] - got.data<float>()[i]));
  CAPTURE(worst);
  CHECK(worst <= step * 1.0001f);
  const tmod::TracedModule loaded = round_trip(c);
  CHECK(text(loaded) == printed);
  CHECK(same_bytes(loaded(x).tensor(), got));
}

TEST_CASE("quant::convert: an unprepared or uncalibrated module is refused, naming what is missing") {
  const Net net = make_net();
  const tmod::TracedModule traced = tmod::trace_module(net, example);
  CHECK_THROWS_WITH_AS((void)Q::convert(traced), doctest::Contains("no FakeQuantize call"), tmod::value_error);
  const tmod::TracedModule fresh = Q::prepare(traced, ptq);
  const std::string before = text(fresh);
  CHECK_THROWS_WITH_AS((void)Q::convert(fresh), doctest::Contains("saw no data"), tmod::value_error);
  CHECK(text(fresh) == before);
}

}  // namespace tmod_test_nn_quant_convert
