// Probes of checked size arithmetic: extents at 2^31, 2^40 and 2^62, negative and zero extents, fed
// to every factory, to the ops whose output size comes from their parameters, and to the module
// constructors. Each must be a shape_error (value_error for a negative extent) naming the op and the
// shape, raised before anything is allocated: under ASan a 4 EiB request would abort the process.
#include "robustness/probe.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/npy.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/linear.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace tmod_test_robustness_sizes {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
using tmod::Shape;
using tmod::shape_error;
using tmod::value_error;

constexpr std::int64_t p30 = std::int64_t{1} << 30, p31 = std::int64_t{1} << 31, p40 = std::int64_t{1} << 40,
                       p62 = std::int64_t{1} << 62;

TEST_CASE("robustness: Shape::numel is checked; a zero extent makes any shape empty") {
  probe::expect_error<shape_error>("numel 2^80", [] { (void)Shape{p40, p40}.numel(); },
                                   {"(1099511627776, 1099511627776)", "overflows"});
  probe::expect_error<shape_error>("numel 2^124", [] { (void)Shape{p62, p62}.numel("op_x"); }, {"op_x"});
  CHECK(Shape{p31, p31}.numel() == p62);  // fits int64: the allocation limit rejects it, not numel
  CHECK(Shape{0, p62, p62}.numel() == 0);
  CHECK(Shape{p62, p62, 0}.numel() == 0);
  probe::expect_error<shape_error>("negative extent", [] { (void)Shape{2, -1}; }, {"negative extent -1"});
}

TEST_CASE("robustness: every factory rejects sizes no allocation can hold, before allocating") {
  for (const Shape& s : {Shape{p31, p31}, Shape{p40, p40}, Shape{p62, p62}, Shape{p30, p30}, Shape{p62, 2},
                         Shape{p31, p31, p31, 1}}) {
    CAPTURE(s.to_string());
    const std::string shape = s.to_string();
    probe::expect_error<shape_error>("zeros", [&] { (void)tmod::zeros(s); }, {"zeros", shape});
    probe::expect_error<shape_error>("ones", [&] { (void)tmod::ones(s, tmod::DType::int32); }, {"ones", shape});
    probe::expect_error<shape_error>("full", [&] { (void)tmod::full(s, 2.0); }, {"full", shape});
    probe::expect_error<shape_error>("randn", [&] { (void)tmod::randn(s); }, {"randn", shape});
    probe::expect_error<shape_error>("uniform", [&] { (void)tmod::uniform(s, 0.f, 1.f); }, {"uniform", shape});
    probe::expect_error<shape_error>("empty", [&] { (void)tmod::Tensor::empty(s); }, {"Tensor.empty", shape});
    const std::vector<float> one{1.f};
    probe::expect_error<shape_error>("tensor(span)", [&] { (void)tmod::tensor(std::span<const float>(one), s); },
                                     {"tensor", shape});
  }
  // 2^30 x 2^30 floats is 4 EiB: it fits int64, so only the allocation limit stops it.
  probe::expect_error<shape_error>("zeros 2^60", [] { (void)tmod::zeros({p30, p30}); }, {"largest allocation"});
  // Empty shapes with huge extents are fine: nothing to allocate.
  CHECK(tmod::zeros({0, p62, p62}).numel() == 0);
  CHECK(tmod::zeros({p62, p62, 0}).nbytes() == 0);
  probe::expect_error<shape_error>("negative", [] { (void)tmod::zeros({3, -2}); }, {"negative extent -2"});
}

TEST_CASE("robustness: a size within the limit that the allocator refuses is a tmod::error") {
#if defined(__SANITIZE_ADDRESS__)
  // ASan's operator new aborts on requests above its 1 TiB maximum instead of throwing bad_alloc,
  // so this path is only probed without it; the limit checks above are probed in both builds.
  MESSAGE("skipped under AddressSanitizer");
#else
  // 2^47 bytes (128 TiB) is the limit itself: no x86-64 process can map that much in one piece.
  const Shape s{tmod::max_tensor_bytes / 4};
  probe::expect_error<tmod::error>("empty 128 TiB", [&] { (void)tmod::Tensor::empty(s); },
                                   {"Tensor.empty", "out of memory", s.to_string()});
#endif
}

TEST_CASE("robustness: arange checks its element count before converting it") {
  probe::expect_error<shape_error>("arange 1e30", [] { (void)tmod::arange(0.0, 1e30); }, {"arange", "stop="});
  probe::expect_error<shape_error>("arange overflowing span", [] { (void)tmod::arange(-1e308, 1e308, 1.0); },
                                   {"arange"});
  probe::expect_error<shape_error>("arange tiny step", [] { (void)tmod::arange(0.0, 1.0, 1e-300); }, {"arange"});
  CHECK(tmod::arange(0.0, 1e30, -1.0).numel() == 0);  // counts down from 0 towards 1e30: empty
  probe::expect_error<value_error>("arange nan", [] { (void)tmod::arange(0.0, std::nan("")); }, {"arange"});
}

TEST_CASE("robustness: conv2d parameters that would overflow the geometry") {
  const tmod::Tensor x = tmod::ones({1, 2, 4, 4}), w = tmod::ones({2, 2, 3, 3}), dw = tmod::ones({2, 1, 3, 3});
  for (const std::int64_t big : {p31, p40, p62}) {
    CAPTURE(big);
    probe::expect_error<shape_error>("padding", [&] { (void)F::conv2d(x, w, {.padding = big}); }, {"nn.conv2d"});
    probe::expect_error<shape_error>("depthwise padding",
                                     [&] { (void)F::conv2d(x, dw, {.padding = big, .groups = 2}); }, {"nn.conv2d"});
    // A huge stride keeps the output at one pixel, but the padded input copy would still be huge.
    probe::expect_error<shape_error>("padding with stride",
                                     [&] { (void)F::conv2d(x, w, {.stride = big, .padding = big}); }, {"nn.conv2d"});
    probe::expect_error<shape_error>("dilation", [&] { (void)F::conv2d(x, w, {.dilation = big}); }, {"nn.conv2d"});
    probe::expect_error<shape_error>("groups", [&] { (void)F::conv2d(x, w, {.groups = big}); }, {"nn.conv2d"});
  }
  probe::expect_error<value_error>("negative padding", [&] { (void)F::conv2d(x, w, {.padding = -1}); },
                                   {"nn.conv2d", "padding"});
  probe::expect_error<value_error>("zero stride", [&] { (void)F::conv2d(x, w, {.stride = 0}); },
                                   {"nn.conv2d", "stride"});
}

TEST_CASE("robustness: output sizes from op parameters and broadcasting are checked") {
  const tmod::Tensor x = tmod::ones({1, 1, 2, 2});
  for (const std::int64_t big : {p31, p40, p62}) {
    CAPTURE(big);
    probe::expect_error<shape_error>("adaptive_avg_pool2d", [&] { (void)F::adaptive_avg_pool2d(x, {big, big}); },
                                     {"nn.adaptive_avg_pool2d"});
    probe::expect_error<shape_error>("reshape", [&] { (void)F::reshape(x, {big, big}); }, {"tensor.reshape"});
    probe::expect_error<shape_error>("reshape -1", [&] { (void)F::reshape(x, {big, big, -1}); },
                                     {"tensor.reshape"});
    probe::expect_error<value_error>("max_pool2d kernel", [&] { (void)F::max_pool2d(x, big); },
                                     {"nn.max_pool2d"});
  }
  probe::expect_error<value_error>("adaptive negative", [&] { (void)F::adaptive_avg_pool2d(x, {-1, 2}); },
                                   {"nn.adaptive_avg_pool2d"});
  probe::expect_error<shape_error>("reshape negative", [&] { (void)F::reshape(x, {-2, -2}); }, {"tensor.reshape"});
  // Small operands whose result is 2^46 floats (256 TiB).
  const tmod::Tensor col = tmod::zeros({std::int64_t{1} << 23, 1}), row = tmod::zeros({1, std::int64_t{1} << 23});
  probe::expect_error<shape_error>("broadcast add", [&] { (void)(col + row); }, {"__add__", "8388608, 8388608"});
  probe::expect_error<shape_error>("matmul", [&] { (void)F::matmul(col, row); }, {"math.matmul"});
  probe::expect_error<shape_error>("linear", [&] { (void)F::linear(col, col); }, {"nn.linear"});
  probe::expect_error<value_error>("batch_norm eps < 0", [] {
    const tmod::Tensor c = tmod::ones({2});
    (void)F::batch_norm(tmod::ones({2, 2, 1, 1}), c, c, tmod::none, tmod::none, {.eps = -1e-5});
  }, {"nn.batch_norm", "eps"});
  probe::expect_error<value_error>("batch_norm eps nan", [] {
    const tmod::Tensor c = tmod::ones({2});
    (void)F::batch_norm(tmod::ones({2, 2, 1, 1}), c, c, tmod::none, tmod::none, {.eps = std::nan("")});
  }, {"nn.batch_norm", "eps"});
}

TEST_CASE("robustness: module constructors check their parameter sizes") {
  probe::expect_error<shape_error>("Linear 2^31", [] { M::Linear(p31, p31); }, {"Linear", "(2147483648, 2147483648)"});
  probe::expect_error<shape_error>("Linear 2^40", [] { M::Linear(p40, p40); }, {"Linear", "overflows"});
  probe::expect_error<shape_error>("Conv2d kernel 2^40", [] { M::Conv2d(1, 1, {p40, p40}); }, {"Conv2d"});
  probe::expect_error<shape_error>("Conv2d channels 2^31", [] { M::Conv2d(p31, p31, 3); }, {"Conv2d"});
  probe::expect_error<value_error>("Linear negative", [] { M::Linear(-1, 2); }, {"Linear"});
}

TEST_CASE("robustness: layers with fan_in 0 get a zero bias, never uninitialised memory") {
  // Leave a freed block full of NaN where the bias is likely to be allocated (ASan fills new blocks
  // with 0xbe bytes instead): an uninitialised bias then shows.
  { const tmod::Tensor junk = tmod::full({5}, std::nan("")); }
  const M::Linear linear(0, 5);
  for (float v : linear.bias.values<float>()) CHECK(v == 0.f);
  { const tmod::Tensor junk = tmod::full({4}, std::nan("")); }
  const M::Conv2d conv(0, 4, 3);
  for (float v : conv.bias.values<float>()) CHECK(v == 0.f);
  // And an empty output: fan_in is in * kh * kw (no division by the zero out_features).
  const M::Linear no_outputs(5, 0);
  CHECK(no_outputs.weight.shape() == Shape{0, 5});
  CHECK(no_outputs(tmod::ones({2, 5})).shape() == Shape{2, 0});
}

/// A one-value .npy file of dtype '<f8' holding `value`, written as numpy's v1.0 layout.
std::vector<std::byte> f8_file(double value) {
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  char raw[sizeof(double)];
  std::memcpy(raw, &value, sizeof value);
  bytes.append(raw, sizeof raw);
  std::vector<std::byte> out(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

TEST_CASE("robustness: .npy float64 values beyond float32's range are a format_error") {
  CHECK(tmod::io::parse_npy(f8_file(0.25)).item() == 0.25f);
  CHECK(tmod::io::parse_npy(f8_file(3.0e38)).item() == static_cast<float>(3.0e38));
  CHECK(std::isinf(tmod::io::parse_npy(f8_file(HUGE_VAL)).item()));  // infinity is in range: it stays
  for (const double v : {1e300, -1e39, 3.5e38}) {
    CAPTURE(v);
    const auto bytes = f8_file(v);
    probe::expect_error<tmod::format_error>("f8", [&] { (void)tmod::io::parse_npy(bytes, "big.npy"); },
                                            {"big.npy", "float32 range", "flat index 0"});
  }
}

}  // namespace

}  // namespace tmod_test_robustness_sizes
