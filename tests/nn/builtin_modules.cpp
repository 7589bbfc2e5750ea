// Builtin modules beyond the PyTorch goldens: default initialisation, argument checks, shape errors,
// Dropout, Elemwise modes, containers, hand-derived values, eval-mode ConvBn2d / ConvBnRelu2d against
// the separate conv, batch norm and relu.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional/conv.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/functional/normalization.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/constant.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/dropout.hpp>
#include <tracemod/nn/elemwise.hpp>
#include <tracemod/nn/flatten.hpp>
#include <tracemod/nn/fused.hpp>
#include <tracemod/nn/identity.hpp>
#include <tracemod/nn/init.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/pooling.hpp>
#include <tracemod/nn/sequential.hpp>

#include <doctest/doctest.h>
#include <thread_counts.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace tmod_test_nn_builtin_modules {

namespace {

namespace tmod = tracemod;
namespace M = tracemod::nn;

template <class Error, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (...) {
    FAIL("threw the wrong exception type");
    return {};
  }
  FAIL("did not throw");
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Largest |v| of a float tensor.
float max_abs(const tmod::Tensor& t) {
  float m = 0;
  for (float v : t.values<float>()) m = std::max(m, std::abs(v));
  return m;
}

/// Largest |a - b| of two float tensors of one shape.
float max_diff(const tmod::Tensor& a, const tmod::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  float m = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.data<float>()[i] - b.data<float>()[i]));
  return m;
}

bool same_bits(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

/// Batch norm statistics and affine parameters far from their initial 0 / 1.
void randomize(M::BatchNorm2d& bn, std::uint64_t seed) {
  const std::int64_t c = bn.num_features;
  bn.running_mean = tmod::randn({c}, seed);
  bn.running_var = tmod::uniform({c}, 0.5f, 2.f, seed + 1);
  if (bn.weight.defined()) {
    bn.weight = tmod::uniform({c}, -1.5f, 1.5f, seed + 2);  // negative scales too
    bn.bias = tmod::randn({c}, seed + 3);
  }
}

/// relu(batch_norm(conv2d(x))) (or without relu) by the separate functional ops, with the module's
/// tensors: the eval-mode reference.
template <class ConvBn>
tmod::Tensor separate_ops(const ConvBn& m, const tmod::Tensor& x, bool relu) {
  namespace F = tracemod::functional;
  const tmod::Tensor c = m.conv.bias.defined() ? F::conv2d(x, m.conv.weight, m.conv.bias, m.conv.conv_params())
                                               : F::conv2d(x, m.conv.weight, tmod::none, m.conv.conv_params());
  const F::batch_norm_params p{.training = false, .eps = m.bn.eps};
  const tmod::Tensor n = m.bn.weight.defined()
                             ? F::batch_norm(c, m.bn.running_mean, m.bn.running_var, m.bn.weight, m.bn.bias, p)
                             : F::batch_norm(c, m.bn.running_mean, m.bn.running_var, tmod::none, tmod::none, p);
  return relu ? F::relu(n) : n;
}

/// The module's eval output against the separate ops: within 1e-5 of the largest value when the batch
/// norm is folded into the weights (rounding differs), bit for bit when it runs as a pass over the
/// conv's output (weights outnumber output values).
template <class ConvBn>
void check_eval(const ConvBn& m, const tmod::Tensor& x, bool relu) {
  const tmod::Tensor expected = separate_ops(m, x, relu);
  const tmod::Tensor y = m(x);
  REQUIRE(y.shape() == expected.shape());
  if (m.conv.weight.numel() > expected.numel()) {
    CHECK(same_bits(y, expected));
  } else {
    CHECK(max_diff(y, expected) <= 1e-5f * max_abs(expected));
  }
}

}  // namespace

TEST_CASE("init: PyTorch's default bounds, reproducible from manual_seed") {
  tmod::manual_seed(5);
  M::Linear a(30, 20);
  tmod::manual_seed(5);
  M::Linear b(30, 20);
  M::Linear c(30, 20);  // the generator moved on
  CHECK(std::equal(a.weight.values<float>().begin(), a.weight.values<float>().end(), b.weight.values<float>().begin()));
  CHECK_FALSE(std::equal(a.weight.values<float>().begin(), a.weight.values<float>().end(),
                         c.weight.values<float>().begin()));
  // kaiming_uniform(a = sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)); so does the bias.
  const float bound = 1.f / std::sqrt(30.f);
  CHECK(max_abs(a.weight) <= bound);
  CHECK(max_abs(a.weight) > 0.95f * bound);  // 600 draws reach close to the bound
  CHECK(max_abs(a.bias) <= bound);
  double mean = 0;
  for (float v : a.weight.values<float>()) mean += v;
  CHECK(std::abs(mean / 600) < 0.1 * bound);

  M::Conv2d conv(8, 4, {3, 2}, {.groups = 2});
  CHECK(conv.weight.shape() == tmod::Shape{4, 4, 3, 2});
  const float conv_bound = 1.f / std::sqrt(4.f * 3 * 2);  // fan_in = in_channels / groups * kh * kw
  CHECK(max_abs(conv.weight) <= conv_bound);
  CHECK(max_abs(conv.weight) > 0.8f * conv_bound);
  CHECK(max_abs(conv.bias) <= conv_bound);

  tmod::Tensor w = tmod::zeros({50, 12});
  M::init::kaiming_uniform_(w);  // a = 0: bound sqrt(6 / fan_in)
  CHECK(max_abs(w) <= std::sqrt(6.f / 12));
  CHECK(max_abs(w) > 0.95f * std::sqrt(6.f / 12));
  tmod::Tensor v = tmod::zeros({3});
  CHECK(contains(error_of<tmod::value_error>([&] { M::init::kaiming_uniform_(v); }), "(3,) has no fan-in"));
  CHECK_THROWS_AS(M::init::uniform_(v, 1.0, 0.0), tmod::value_error);
}

TEST_CASE("BatchNorm2d: PyTorch's initial state, counter and batch statistics") {
  M::BatchNorm2d bn(3);
  CHECK(bn.weight.values<float>()[2] == 1.f);
  CHECK(bn.bias.values<float>()[0] == 0.f);
  CHECK(bn.running_mean.values<float>()[1] == 0.f);
  CHECK(bn.running_var.values<float>()[1] == 1.f);
  CHECK(bn.num_batches_tracked.dtype() == tmod::DType::int32);
  CHECK(bn.num_batches_tracked.ndim() == 0);

  // Channel 0 holds {1, 3}: mean 2, biased variance 1, unbiased 2.
  tmod::Tensor x = tmod::zeros({2, 3, 1, 1});
  x.data<float>()[0] = 1.f;
  x.data<float>()[3] = 3.f;
  const tmod::Tensor y = bn(x);
  CHECK(bn.num_batches_tracked.item<std::int32_t>() == 1);
  CHECK(y.at({0, 0, 0, 0}) == doctest::Approx(-1.0 / std::sqrt(1.0 + 1e-5)));
  CHECK(bn.running_mean.at({0}) == doctest::Approx(0.2));         // 0.9 * 0 + 0.1 * 2
  CHECK(bn.running_var.at({0}) == doctest::Approx(0.9 + 0.1 * 2));  // unbiased batch variance
  bn.eval();
  (void)bn(x);
  CHECK(bn.num_batches_tracked.item<std::int32_t>() == 1);  // eval does not count

  // Without running statistics, eval mode normalises with the batch's.
  M::BatchNorm2d plain(3, {.affine = false, .track_running_stats = false});
  plain.eval();
  CHECK(plain(x).at({1, 0, 0, 0}) == doctest::Approx(1.0 / std::sqrt(1.0 + 1e-5)));
  CHECK_FALSE(plain.weight.defined());
  CHECK_FALSE(plain.num_batches_tracked.defined());
}

TEST_CASE("Builtin constructors reject bad arguments with value_error") {
  CHECK(contains(error_of<tmod::value_error>([] { M::Linear(-1, 2); }), "in_features (-1)"));
  CHECK(
      contains(error_of<tmod::value_error>([] { M::Conv2d(6, 4, 3, {.groups = 4}); }),
               "Conv2d(6, 4, kernel_size=(3, 3), groups=4): in_channels and out_channels must be divisible by groups"));
  CHECK(contains(error_of<tmod::value_error>([] { M::Conv2d(2, 2, 0); }), "kernel_size must be positive"));
  CHECK(contains(error_of<tmod::value_error>([] { M::Conv2d(2, 2, 3, {.stride = 0}); }), "stride and dilation"));
  CHECK(contains(error_of<tmod::value_error>([] { M::Conv2d(2, 2, 3, {.groups = 0}); }), "groups must be positive"));
  CHECK(contains(error_of<tmod::value_error>([] { M::BatchNorm2d(2, {.eps = 0}); }), "eps 0.0 must be positive"));
  CHECK(contains(error_of<tmod::value_error>([] { M::BatchNorm2d(-2); }), "num_features -2"));
  CHECK(contains(error_of<tmod::value_error>([] { M::Dropout(1.5); }), "probability 1.5 is not in [0, 1]"));
  CHECK(contains(error_of<tmod::value_error>([] { M::Elemwise("FUSE_MUL_ADD4"); }),
                 "unknown mode 'FUSE_MUL_ADD4' (supported: RELU, SIGMOID"));
}

TEST_CASE("Builtin forwards and infer_shape report bad shapes with shape_error") {
  M::Linear linear(4, 5);
  CHECK(contains(error_of<tmod::shape_error>([&] { (void)linear(tmod::zeros({3, 3})); }), "(3, 3)"));
  CHECK(contains(error_of<tmod::shape_error>([&] { (void)linear.infer_shape({2, 7}); }), "(2, 7)"));
  CHECK(linear.infer_shape({2, 6, 4}) == tmod::Shape{2, 6, 5});

  M::Conv2d conv(3, 8, 3, {.stride = 2, .padding = 1});
  CHECK(contains(error_of<tmod::shape_error>([&] { (void)conv(tmod::zeros({1, 4, 8, 8})); }), "(1, 4, 8, 8)"));
  CHECK(conv.infer_shape({2, 3, 9, 8}) == tmod::Shape{2, 8, 5, 4});

  M::BatchNorm2d bn(3);
  CHECK(contains(error_of<tmod::shape_error>([&] { (void)bn(tmod::zeros({2, 4, 5, 5})); }),
                 "BatchNorm2d(3): input (2, 4, 5, 5) has 4 channels"));
  CHECK(contains(error_of<tmod::shape_error>([&] { (void)bn.infer_shape({2, 3}); }),
                 "expected a 4-D input (N, C, H, W), got (2, 3)"));

  M::MaxPool2d pool(3, {.stride = 2});
  CHECK(pool.infer_shape({1, 2, 7, 9}) == tmod::Shape{1, 2, 3, 4});
  CHECK_THROWS_AS((void)pool(tmod::zeros({2, 7, 9})), tmod::shape_error);
  CHECK(M::AvgPool2d(2).infer_shape({1, 1, 5, 4}) == tmod::Shape{1, 1, 2, 2});
  CHECK(M::AdaptiveAvgPool2d({2, 3}).infer_shape({4, 5, 9, 9}) == tmod::Shape{4, 5, 2, 3});
  CHECK(M::Flatten().infer_shape({2, 3, 4}) == tmod::Shape{2, 12});
  CHECK(M::ConvBnRelu2d(3, 4, 1).infer_shape({2, 3, 5, 5}) == tmod::Shape{2, 4, 5, 5});
  CHECK_THROWS_AS((void)M::ConvBn2d(3, 4, 1).infer_shape({2, 2, 5, 5}), tmod::shape_error);
}

TEST_CASE("Elemwise: modes, case-insensitive names, arity") {
  M::Elemwise add_relu("fuse_add_relu");
  CHECK(add_relu.method() == "FUSE_ADD_RELU");
  CHECK(add_relu.arity() == 2);
  const tmod::Tensor y = add_relu(tmod::tensor({1.f, -2.f, 0.5f}), tmod::tensor({-3.f, 1.f, 0.25f}));
  CHECK(y.at({0}) == 0.f);
  CHECK(y.at({1}) == 0.f);
  CHECK(y.at({2}) == 0.75f);
  CHECK(contains(error_of<tmod::value_error>([&] { (void)add_relu(tmod::zeros({2})); }),
                 "Elemwise(FUSE_ADD_RELU) takes 2 inputs, got 1"));
  M::Elemwise negate("NEGATE");
  CHECK(negate(tmod::tensor({2.f})).at({0}) == -2.f);
  CHECK(contains(error_of<tmod::value_error>([&] { (void)negate.infer_shape({2}, {2}); }), "takes 1 input, got 2"));
  CHECK(M::Elemwise("MAX").infer_shape({2, 1}, {3}) == tmod::Shape{2, 3});
  CHECK(contains(error_of<tmod::shape_error>([] { (void)M::Elemwise("ADD").infer_shape({2, 3}, {4}); }),
                 "Elemwise(ADD)"));
  CHECK(M::Elemwise("ADD").repr() == "Elemwise(method=ADD)");
}

TEST_CASE("Elemwise: FUSE_ADD_RELU in one pass has the bits of add then relu, broadcasting too") {
  M::Elemwise add_relu("FUSE_ADD_RELU");
  const tmod::Tensor x = tmod::randn({2, 3, 5, 7}, 1), y = tmod::randn({2, 3, 5, 7}, 2), c = tmod::randn({3, 1, 1}, 3);
  const auto same_bits = [](const tmod::Tensor& a, const tmod::Tensor& b) {
    return a.shape() == b.shape() && std::equal(a.data<float>(), a.data<float>() + a.numel(), b.data<float>(),
                                                [](float p, float q) { return std::memcmp(&p, &q, sizeof p) == 0; });
  };
  CHECK(same_bits(add_relu(x, y), tracemod::functional::relu(tracemod::functional::add(x, y))));
  CHECK(same_bits(add_relu(x, c), tracemod::functional::relu(tracemod::functional::add(x, c))));
  CHECK(same_bits(add_relu(c, x), tracemod::functional::relu(tracemod::functional::add(c, x))));
  CHECK_THROWS_AS((void)add_relu(x, tmod::randn({4})), tmod::shape_error);
}

TEST_CASE("Dropout: identity in eval mode and for p = 0; scaled Bernoulli mask in training") {
  const tmod::Tensor x = tmod::ones({10000});
  M::Dropout drop(0.25);
  drop.eval();
  CHECK(drop(x).shares_storage_with(x));
  drop.train();
  tmod::manual_seed(3);
  const tmod::Tensor y = drop(x);
  std::int64_t zeros = 0, kept = 0;
  for (float v : y.values<float>()) {
    zeros += v == 0.f;
    kept += v == static_cast<float>(1.0 / 0.75);
  }
  CHECK(zeros + kept == 10000);  // every element is dropped or scaled by 1 / (1 - p)
  CHECK(zeros > 2300);  // 2500 expected, standard deviation 43
  CHECK(zeros < 2700);
  tmod::manual_seed(3);
  const tmod::Tensor again = drop(x);
  CHECK(std::equal(y.values<float>().begin(), y.values<float>().end(), again.values<float>().begin()));
  CHECK(M::Dropout(0.0)(x).shares_storage_with(x));
  CHECK(max_abs(M::Dropout(1.0)(x)) == 0.f);
}

TEST_CASE("Identity, ReLU, Flatten, AdaptiveAvgPool2d on hand-derived values") {
  const tmod::Tensor x = tmod::tensor({{{{1.f, -2.f}, {3.f, -4.f}}}});  // (1, 1, 2, 2)
  CHECK(M::Identity()(x).shares_storage_with(x));
  const tmod::Tensor r = M::ReLU()(x);
  CHECK(r.at({0, 0, 0, 1}) == 0.f);
  CHECK(r.at({0, 0, 1, 0}) == 3.f);
  const tmod::Tensor f = M::Flatten()(x);
  CHECK(f.shape() == tmod::Shape{1, 4});
  CHECK(f.at({0, 2}) == 3.f);
  CHECK(M::Flatten(0)(x).shape() == tmod::Shape{4});
  CHECK(M::AdaptiveAvgPool2d(1)(x).item() == -0.5f);
  const tmod::Tensor c = tmod::constant({1.f, 2.f});
  CHECK(c.shape() == tmod::Shape{2});
  CHECK(c.at({1}) == 2.f);
  CHECK(tmod::constant(x).shares_storage_with(x));
}

TEST_CASE("Sequential: typed access, structured bindings, CTAD, empty chain") {
  M::Sequential seq{M::Linear(2, 3), M::ReLU{}, M::Linear(3, 1)};
  static_assert(std::is_same_v<decltype(seq), M::Sequential<M::Linear, M::ReLU, M::Linear>>);
  static_assert(decltype(seq)::size() == 3);
  auto& [first, act, last] = seq;
  CHECK(&first == &seq.get<0>());
  CHECK(&last == &seq.get<2>());
  CHECK(act.type_name() == "ReLU");
  const tmod::Tensor x = tmod::tensor({{0.5f, -1.f}});
  const tmod::Tensor expected = last(act(first(x)));
  const tmod::Tensor y = seq(x);
  CHECK(y.at({0, 0}) == expected.at({0, 0}));
  M::Sequential<> empty;
  CHECK(empty(x).shares_storage_with(x));
  CHECK(empty.named_children().empty());
  M::Sequential<M::ReLU, M::Identity> defaulted;  // default-constructible elements
  CHECK(defaulted.named_children().size() == 2);
}

TEST_CASE("ConvBn2d, ConvBnRelu2d in eval mode: one conv kernel call matches conv, batch norm, relu") {
  struct config {
    std::int64_t in, out, kernel;
    M::Conv2dOptions conv;
    M::BatchNorm2dOptions bn;
    tmod::Shape x;
  };
  // Folded (weights <= output values) and batch norm pass, with and without bias, grouped,
  // depthwise, strided, without affine parameters.
  const std::vector<config> configs{
      {4, 6, 3, {.padding = 1}, {}, {2, 4, 9, 9}},
      {4, 8, 3, {.padding = 1}, {}, {2, 4, 16, 16}},  // 32 tiles: Winograd
      {4, 6, 3, {.padding = 1, .groups = 2, .bias = false}, {.eps = 1e-3}, {2, 4, 9, 9}},
      {6, 6, 3, {.stride = 2, .padding = 1, .groups = 6}, {}, {1, 6, 11, 11}},
      {5, 8, 1, {.bias = false}, {.affine = false}, {3, 5, 6, 6}},
      {16, 16, 3, {.padding = 1}, {}, {1, 16, 3, 3}},
      {16, 12, 3, {.padding = 1, .groups = 4, .bias = false}, {}, {1, 16, 2, 2}},
      {16, 16, 3, {.stride = 2, .padding = 1, .bias = false}, {.affine = false}, {2, 16, 4, 5}},
  };
  std::uint64_t seed = 100;
  for (const config& c : configs) {
    CAPTURE(c.x.to_string());
    CAPTURE(c.conv.groups);
    M::ConvBn2d convbn(c.in, c.out, c.kernel, c.conv, c.bn);
    M::ConvBnRelu2d convbnrelu(c.in, c.out, c.kernel, c.conv, c.bn);
    randomize(convbn.bn, seed);
    randomize(convbnrelu.bn, seed + 10);
    convbn.eval();
    convbnrelu.eval();
    const tmod::Tensor x = tmod::randn(c.x, seed + 20);
    check_eval(convbn, x, false);
    check_eval(convbnrelu, x, true);
    thread_counts::check_bit_identical("ConvBnRelu2d " + c.x.to_string(), [&] {
      const tmod::Tensor y = convbnrelu(x);
      return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
    });
    seed += 100;
  }
}

TEST_CASE("ConvBnRelu2d in eval mode: new weights and statistics are used on the next call") {
  // One configuration per path: folded into the weights, and a batch norm pass.
  for (const tmod::Shape& shape : {tmod::Shape{2, 4, 8, 8}, tmod::Shape{1, 4, 2, 2}}) {
    CAPTURE(shape.to_string());
    M::ConvBnRelu2d m(4, 4, 3, {.padding = 1});
    randomize(m.bn, 1);
    m.eval();
    const tmod::Tensor x = tmod::randn(shape, 2);
    float* weight = m.conv.weight.data<float>();  // a pointer kept across calls
    check_eval(m, x, true);
    const tmod::Tensor before = m(x);

    weight[5] += 1.f;  // a write through the kept pointer
    check_eval(m, x, true);
    CHECK_FALSE(same_bits(m(x), before));
    m.conv.bias.data<float>()[1] = 3.f;
    m.bn.running_var.data<float>()[2] = 0.25f;
    m.bn.weight.data<float>()[3] = -2.f;
    check_eval(m, x, true);
    m.bn.running_mean = tmod::randn({4}, 3);  // a new tensor
    check_eval(m, x, true);
    m.bn.eps = 0.5;
    check_eval(m, x, true);
    m.bn.eps = 1e-5;

    // load_state_dict copies into the module's tensors.
    M::ConvBnRelu2d other(4, 4, 3, {.padding = 1});
    randomize(other.bn, 4);
    other.eval();
    m.load_state_dict(other.state_dict());
    CHECK(same_bits(m(x), other(x)));
    check_eval(m, x, true);

    // A training call updates the running statistics; the next eval call uses them.
    const tmod::Tensor mean_before = m.bn.running_mean.clone();
    m.train();
    (void)m(x);
    CHECK_FALSE(same_bits(m.bn.running_mean, mean_before));
    m.eval();
    check_eval(m, x, true);
  }
}

TEST_CASE("ConvBn2d, ConvBnRelu2d in training mode: conv, batch norm, relu as before") {
  namespace F = tracemod::functional;
  M::ConvBnRelu2d m(4, 6, 3, {.padding = 1, .groups = 2});
  M::ConvBn2d m2(4, 6, 3, {.padding = 1, .groups = 2});
  M::Conv2d conv(4, 6, 3, {.padding = 1, .groups = 2});
  M::BatchNorm2d bn(6);
  randomize(m.bn, 7);
  m2.load_state_dict(m.state_dict());
  conv.load_state_dict(m.conv.state_dict());
  bn.load_state_dict(m.bn.state_dict());
  const tmod::Tensor x = tmod::randn({2, 4, 5, 5}, 8);
  for (int call = 0; call < 2; ++call) {
    const tmod::Tensor expected = bn(conv(x));
    CHECK(same_bits(m2(x), expected));
    CHECK(same_bits(m(x), F::relu(expected)));
  }
  // Each module counted its two batches and updated its statistics as the separate bn did.
  for (const M::BatchNorm2d* b : {&m.bn, &m2.bn}) {
    CHECK(b->num_batches_tracked.item<std::int32_t>() == 2);
    CHECK(same_bits(b->running_mean, bn.running_mean));
    CHECK(same_bits(b->running_var, bn.running_var));
  }
}

TEST_CASE("ConvBn2d in eval mode reports bad input as the conv does, naming the ConvBn2d") {
  M::ConvBn2d m(3, 8, 3, {.stride = 2, .padding = 1});
  m.eval();
  for (const tmod::Shape& shape : {tmod::Shape{1, 4, 8, 8}, tmod::Shape{1, 3, 8}}) {
    const std::string conv_error = error_of<tmod::shape_error>([&] { (void)m.conv(tmod::zeros(shape)); });
    REQUIRE(contains(conv_error, "Conv2d: nn.conv2d: input " + shape.to_string()));
    CHECK(error_of<tmod::shape_error>([&] { (void)m(tmod::zeros(shape)); }) ==
          "ConvBn2d: " + conv_error.substr(conv_error.find("nn.conv2d")));
  }
  CHECK(contains(error_of<tmod::dtype_error>([&] { (void)m(tmod::zeros({1, 3, 8, 8}, tmod::DType::int32)); }), "inp"));
  // A batch norm whose statistics do not fit the conv runs the separate calls and their errors.
  m.bn.running_mean = tmod::zeros({7});
  CHECK_THROWS_AS((void)m(tmod::zeros({1, 3, 8, 8})), tmod::shape_error);
}

}  // namespace tmod_test_nn_builtin_modules
