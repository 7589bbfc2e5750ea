// F::conv_bias_activation: the conv epilogue as an op (eager bits against the separate ops, call
// forms, errors) and its registry entry (params, positional count, type-erased call and shapes).
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/functional/registry.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tmod_test_functional_conv_bias_activation {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("functional: conv_bias_activation has the bits of conv2d, add and relu / relu6") {
  const Tensor x = tmod::randn({2, 6, 9, 9}, 1), w = tmod::randn({8, 3, 3, 3}, 2), b = tmod::randn({8}, 3);
  const F::conv2d_fn::params conv{.stride = 2, .padding = 1, .dilation = 1, .groups = 2};
  const Tensor plain = F::conv2d(x, w, b, conv);
  const Tensor z = tmod::randn(plain.shape(), 4) * 4.0f;
  CHECK(same_bits(F::conv_bias_activation(x, w, b, z, 2, 1, 1, 2, "relu"), F::relu(plain + z)));
  CHECK(same_bits(F::conv_bias_activation(x, w, b, z, 2, 1, 1, 2, "relu6"), F::relu6(plain + z)));
  CHECK(same_bits(F::conv_bias_activation(x, w, b, z, {.stride = 2, .padding = 1, .groups = 2}), plain + z));
  CHECK(same_bits(F::conv_bias_activation(x, w, b, tmod::none, 2, 1, 1, 2, "relu"), F::relu(plain)));
  CHECK(same_bits(F::conv_bias_activation(x, w, tmod::none, tmod::none, {.stride = 2, .padding = 1, .groups = 2}),
                  F::conv2d(x, w, tmod::none, conv)));
  CHECK(same_bits(F::conv_bias_activation(x, w, b, {.stride = 2, .padding = 1, .groups = 2}), plain));
}

// A read-only weight keeps its Winograd filters (Tensor::derived), one set per tile size: the 7x7
// plane runs F(2x2, 3x3) at batch 1 and F(4x4, 3x3) at batch 4 (kernels::conv2d_winograd_tile), so
// filters kept for one and read by the other would be the wrong transform, and too short.
TEST_CASE("functional: a read-only weight keeps Winograd filters per tile size, F(2x2) and F(4x4) alike") {
  Tensor w = tmod::randn({512, 512, 3, 3}, 5) * 0.02f;
  const Tensor writable = w.clone();
  w.make_read_only();
  const F::conv2d_fn::params p{.stride = 1, .padding = 1};
  // Winograd forced, so the writable weight's calls (filters transformed per call) run it too.
  tracemod::kernels::set_conv2d_algorithm(tracemod::kernels::conv2d_algorithm::winograd);
  for (const std::int64_t n : {1, 4, 1}) {
    CAPTURE(n);
    const Tensor x = tmod::randn({n, 512, 7, 7}, static_cast<std::uint64_t>(6 + n));
    CHECK(same_bits(F::conv_bias_activation(x, w, tmod::none, tmod::none, {.stride = 1, .padding = 1}),
                    F::conv2d(x, writable, tmod::none, p)));
  }
  tracemod::kernels::set_conv2d_algorithm(tracemod::kernels::conv2d_algorithm::automatic);
}

TEST_CASE("functional: conv_bias_activation rejects a bad z, mode or operand with the op's name") {
  const Tensor x = tmod::randn({1, 3, 8, 8}), w = tmod::randn({4, 3, 3, 3}), b = tmod::randn({4});
  const auto message = [](auto&& call) {
    try {
      (void)call();
    } catch (const tmod::error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string z_error = message([&] { return F::conv_bias_activation(x, w, b, tmod::randn({1, 4, 8, 8})); });
  CHECK(z_error.find("nn.conv_bias_activation: z (1, 4, 8, 8) must have the output's shape (1, 4, 6, 6)") == 0);
  CHECK_THROWS_AS((void)F::conv_bias_activation(x, w, b, tmod::randn({1, 4, 8, 8})), tmod::shape_error);
  CHECK_THROWS_AS((void)F::conv_bias_activation(x, w, b, tmod::none, 1, 0, 1, 1, "gelu"), tmod::value_error);
  CHECK(message([&] { return F::conv_bias_activation(x, w, b, tmod::none, 1, 0, 1, 1, "gelu"); })
            .find("unknown nonlinear_mode 'gelu' (supported: identity, relu, relu6)") != std::string::npos);
  CHECK(message([&] { return F::conv_bias_activation(x, tmod::randn({4, 2, 3, 3}), b); })
            .find("nn.conv_bias_activation: input (1, 3, 8, 8), weight (4, 2, 3, 3)") == 0);
  CHECK_THROWS_AS((void)F::conv_bias_activation(x, w, b, Tensor{}), tmod::value_error);
}

TEST_CASE("registry: conv_bias_activation's entry (params, positional params, erased call and shape)") {
  const F::op_entry& e = F::entry_of(F::conv_bias_activation);
  CHECK(e.name == "conv_bias_activation");
  CHECK(e.operands.size() == 4);
  REQUIRE(e.params.size() == 5);
  CHECK(e.positional_param_count() == 5);
  CHECK(e.params[4].name == "nonlinear_mode");
  CHECK(e.params[4].default_value.string() == "identity");
  CHECK_FALSE(e.elementwise);

  const Tensor x = tmod::randn({1, 3, 7, 7}, 5), w = tmod::randn({4, 3, 3, 3}, 6), b = tmod::randn({4}, 7);
  const Tensor z = tmod::randn({1, 4, 7, 7}, 8);
  const std::vector<tmod::Value> values{tmod::Value::tuple({tmod::Value(1), tmod::Value(1)}), tmod::Value(1),
                                        tmod::Value(1), tmod::Value(1), tmod::Value("relu6")};
  const F::erased_params p = e.make_params(values);
  using k = F::erased_operand::kind;
  const std::vector<F::erased_operand> ops{{k::tensor, &x}, {k::tensor, &w}, {k::tensor, &b}, {k::tensor, &z}};
  CHECK(same_bits(e.call(p.get(), ops), F::conv_bias_activation(x, w, b, z, 1, 1, 1, 1, "relu6")));
  const std::vector<F::erased_shape> shapes{{k::tensor, x.shape()}, {k::tensor, w.shape()}, {k::tensor, b.shape()},
                                            {k::none, Shape{}}};
  CHECK(e.infer_shape(p.get(), shapes) == Shape{1, 4, 7, 7});
  // A mode that is not a string, and one the op does not know.
  std::vector<tmod::Value> bad = values;
  bad[4] = tmod::Value(1);
  CHECK_THROWS_AS((void)e.make_params(bad), tmod::value_error);
  bad[4] = tmod::Value("swish");
  CHECK_THROWS_AS((void)e.infer_shape(e.make_params(bad).get(), shapes), tmod::value_error);
}

}  // namespace tmod_test_functional_conv_bias_activation
