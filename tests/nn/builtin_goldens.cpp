// Every builtin module against PyTorch (tests/data/modules, from tests/reference/gen_modules.py):
// weights loaded with a strict load_state_dict (so parameter names and shapes match PyTorch's),
// outputs, infer_shape, and the running statistics after a training-mode call.
#include "module_golden.hpp"

#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/elemwise.hpp>
#include <tracemod/nn/flatten.hpp>
#include <tracemod/nn/fused.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/pooling.hpp>
#include <tracemod/nn/sequential.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace tmod_test_nn_builtin_goldens {

namespace {

namespace tmod = tracemod;
namespace M = tracemod::nn;

constexpr double rtol = 1e-5, atol = 1e-5;

/// m(in0) or, for binary Elemwise modes, m(in0, in1).
template <class Mod>
tmod::Tensor call(const Mod& m, const std::vector<tmod::Tensor>& in) {
  if constexpr (requires { m.forward(in[0], in[1]); })
    if (in.size() == 2) return m(in[0], in[1]);
  return m(in[0]);
}

template <class Mod>
tmod::Shape infer(const Mod& m, const std::vector<tmod::Tensor>& in) {
  if constexpr (requires { m.infer_shape(in[0].shape(), in[1].shape()); })
    if (in.size() == 2) return m.infer_shape(in[0].shape(), in[1].shape());
  return m.infer_shape(in[0].shape());
}

template <class Mod>
void check_case(Mod& m, const std::string& name, bool training = false) {
  INFO("case " << name);
  m.load_state_dict(module_golden::state(name));
  m.train(training);
  const std::vector<tmod::Tensor> in = golden::inputs(module_golden::case_path(name));
  REQUIRE((in.size() == 1 || in.size() == 2));
  const tmod::Tensor y = call(m, in);
  golden::check_close(y, golden::load(module_golden::case_path(name), "out"), rtol, atol, name);
  if constexpr (M::is_builtin_module_v<Mod>)
    CHECK(infer(m, in) == y.shape());
  if (training) {
    const tmod::StateDict after = module_golden::state(name, true);
    std::vector<std::string> keys = m.state_dict().keys();
    std::sort(keys.begin(), keys.end());
    REQUIRE(after.keys() == keys);  // state() lists keys sorted
    for (const auto& [key, expected] : after)
      golden::check_close(m.state_dict().at(key), expected, rtol, atol, name + " after: " + key);
  }
}

}  // namespace

TEST_CASE("Linear matches PyTorch") {
  M::Linear with_bias(5, 3);
  check_case(with_bias, "linear_bias");
  M::Linear without_bias(5, 3, false);
  check_case(without_bias, "linear_nobias");
}

TEST_CASE("Conv2d matches PyTorch") {
  M::Conv2d plain(3, 4, 3, {.padding = 1});
  check_case(plain, "conv2d_k3_p1");
  M::Conv2d strided(4, 6, {3, 2}, {.stride = 2, .padding = {1, 2}, .dilation = 2, .groups = 2, .bias = false});
  check_case(strided, "conv2d_k3x2_s2_p1x2_d2_g2_nobias");
}

TEST_CASE("BatchNorm2d matches PyTorch in eval and training mode") {
  M::BatchNorm2d eval_mode(5);
  check_case(eval_mode, "batchnorm2d_eval");
  M::BatchNorm2d train_mode(5);
  check_case(train_mode, "batchnorm2d_train", true);
  CHECK(train_mode.num_batches_tracked.item<std::int32_t>() == 8);
  M::BatchNorm2d cumulative(5, {.momentum = std::nullopt});
  check_case(cumulative, "batchnorm2d_train_momentum_none", true);
  M::BatchNorm2d custom(5, {.eps = 1e-3, .momentum = 0.3});
  check_case(custom, "batchnorm2d_train_eps_momentum", true);
  M::BatchNorm2d plain(5, {.affine = false, .track_running_stats = false});
  check_case(plain, "batchnorm2d_plain_eval");
}

TEST_CASE("Pooling modules and Flatten match PyTorch") {
  M::MaxPool2d max_a(3, {.stride = 2, .padding = 1});
  check_case(max_a, "maxpool2d_k3_s2_p1");
  M::MaxPool2d max_b(2, {.ceil_mode = true});
  check_case(max_b, "maxpool2d_k2_ceil");
  M::MaxPool2d max_c(3, {.stride = 1, .padding = 1, .dilation = 2});
  check_case(max_c, "maxpool2d_k3_s1_p1_d2");
  M::AvgPool2d avg_a(3, {.stride = 2, .padding = 1});
  check_case(avg_a, "avgpool2d_k3_s2_p1");
  M::AvgPool2d avg_b(3, {.stride = 2, .padding = 1, .count_include_pad = false});
  check_case(avg_b, "avgpool2d_k3_s2_p1_exclude_pad");
  M::AvgPool2d avg_c(2, {.ceil_mode = true});
  check_case(avg_c, "avgpool2d_k2_ceil");
  M::AdaptiveAvgPool2d adaptive_a(1);
  check_case(adaptive_a, "adaptiveavgpool2d_1");
  M::AdaptiveAvgPool2d adaptive_b({3, 2});
  check_case(adaptive_b, "adaptiveavgpool2d_3x2");
  M::Flatten flatten_a;
  check_case(flatten_a, "flatten_default");
  M::Flatten flatten_b(1, 2);
  check_case(flatten_b, "flatten_1_2");
}

TEST_CASE("Elemwise matches PyTorch in every mode") {
  for (std::string_view mode : M::Elemwise::mode_names) {
    std::string name = "elemwise_";
    for (char c : mode) name += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    M::Elemwise m(mode);
    check_case(m, name);
  }
}

TEST_CASE("ConvBn2d and ConvBnRelu2d match conv, bn (and relu) in PyTorch") {
  M::ConvBn2d convbn_eval(3, 4, 3, {.stride = 2, .padding = 1});
  check_case(convbn_eval, "convbn2d_eval");
  M::ConvBn2d convbn_train(3, 4, 3, {.stride = 2, .padding = 1});
  check_case(convbn_train, "convbn2d_train", true);
  M::ConvBnRelu2d convbnrelu_eval(3, 4, 3, {.stride = 2, .padding = 1});
  check_case(convbnrelu_eval, "convbnrelu2d_eval");
  M::ConvBnRelu2d convbnrelu_train(3, 4, 3, {.stride = 2, .padding = 1});
  check_case(convbnrelu_train, "convbnrelu2d_train", true);
}

TEST_CASE("Sequential matches PyTorch's nn.Sequential") {
  M::Sequential seq{M::Conv2d(3, 4, 3, {.padding = 1}), M::BatchNorm2d(4), M::ReLU{}, M::MaxPool2d(2), M::Flatten{},
                    M::Linear(4 * 4 * 4, 5)};
  check_case(seq, "sequential_conv_bn_relu_pool_flatten_linear");
}

}  // namespace tmod_test_nn_builtin_goldens
