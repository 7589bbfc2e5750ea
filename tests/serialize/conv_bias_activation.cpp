// A traced module that calls F::conv_bias_activation: recorded, printed, interpreted, drawn and
// saved/loaded through the op registry like every other op.
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <sstream>
#include <string>

namespace tmod_test_serialize_conv_bias_activation {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

struct ResidualBlock : tmod::Module {
  M::Conv2d conv{3, 8, 3, {.padding = 1}};
  tmod::Parameter weight{tmod::randn({8, 8, 3, 3}, 11) * 0.2f};
  tmod::Parameter bias{tmod::randn({8}, 12)};
  TM_MODULE(ResidualBlock, conv, weight, bias)
  auto forward(const auto& x) const {
    auto y = conv(x);
    return F::conv_bias_activation(y, weight, bias, y, 1, 1, 1, 1, "relu");
  }
};

bool same_bits(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

/// save -> load gives a module that prints the same and computes `expected` from x.
void check_round_trip(const tmod::TracedModule& traced, const tmod::Tensor& x, const tmod::Tensor& expected) {
  std::ostringstream os;
  tmod::save(traced, os);
  const std::string bytes = os.str();
  tmod::TracedModule back = tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
  CHECK(tmod::graph::to_string(back.graph()) == tmod::graph::to_string(traced.graph()));
  CHECK(same_bits(back(x).tensor(), expected));
}

}  // namespace

TEST_CASE("conv_bias_activation: traced, printed, interpreted and saved/loaded through the registry") {
  ResidualBlock m;
  const tmod::Tensor x = tmod::randn({1, 3, 8, 8}, 13);
  const tmod::Tensor y = m.conv(x);
  const tmod::Tensor expected = F::relu(F::conv2d(y, m.weight, m.bias, 1, 1) + y);
  CHECK(same_bits(m(x), expected));

  tmod::TracedModule traced = tmod::trace_module(m, x);
  const std::string text = tmod::graph::to_string(traced.graph());
  CAPTURE(text);
  CHECK(text.find("conv_bias_activation_out = nn.conv_bias_activation(conv_out, weight, bias, conv_out, (1, 1), "
                  "(1, 1), (1, 1), 1, relu, )") != std::string::npos);
  CHECK(traced.graph().to_dot().find("conv_bias_activation") != std::string::npos);
  CHECK(same_bits(traced(x).tensor(), expected));

  check_round_trip(traced, x, expected);
}

namespace {

struct ScaleShift : tmod::Module {
  tmod::Parameter shift{tmod::randn({4, 1, 1}, 14)};
  TM_MODULE(ScaleShift, shift)
  auto forward(const auto& x) const {
    return F::fused_elementwise(std::make_tuple(x, shift), "relu(x0 * 0.5 + x1)");
  }
};

}  // namespace

TEST_CASE("elemwise.fused: traced, printed with its program, interpreted and saved/loaded") {
  ScaleShift m;
  const tmod::Tensor x = tmod::randn({2, 4, 3, 5}, 15);
  const tmod::Tensor expected = F::relu(x * 0.5f + m.shift);
  CHECK(same_bits(m(x), expected));
  tmod::TracedModule traced = tmod::trace_module(m, x);
  const std::string text = tmod::graph::to_string(traced.graph());
  CAPTURE(text);
  CHECK(text.find("fused_out = elemwise.fused[relu(x0 * 0.5 + x1)](x, shift, )") != std::string::npos);
  CHECK(traced.graph().to_dot().find("elemwise.fused[relu(x0 * 0.5 + x1)]") != std::string::npos);
  CHECK(same_bits(traced(x).tensor(), expected));
  check_round_trip(traced, x, expected);
}

}  // namespace tmod_test_serialize_conv_bias_activation
