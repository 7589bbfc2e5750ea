// Bad calls of the functional ops: each throws the right tracemod::error subclass, and its message
// names the op as a graph prints it ("nn.conv2d", "__add__", "tensor.reshape") and the offending
// shapes or values.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>

#include <doctest/doctest.h>

#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace tmod_test_functional_errors {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Tensor;

template <class E>
std::string class_name() {
  if constexpr (std::is_same_v<E, tmod::shape_error>) return "shape_error";
  if constexpr (std::is_same_v<E, tmod::value_error>) return "value_error";
  if constexpr (std::is_same_v<E, tmod::dtype_error>) return "dtype_error";
  return typeid(E).name();
}

std::string class_name_of(const std::exception& e) {
  if (dynamic_cast<const tmod::shape_error*>(&e)) return "shape_error";
  if (dynamic_cast<const tmod::value_error*>(&e)) return "value_error";
  if (dynamic_cast<const tmod::dtype_error*>(&e)) return "dtype_error";
  return typeid(e).name();
}

// Runs `call`; it must throw an E whose message contains every one of `needles`.
template <class E, class Call>
void check_error(std::string_view expression, Call call, std::initializer_list<std::string_view> needles) {
  INFO(expression);
  try {
    call();
    FAIL_CHECK("no exception; expected " << class_name<E>());
  } catch (const E& e) {
    const std::string message = e.what();
    for (std::string_view needle : needles)
      CHECK_MESSAGE(message.find(needle) != std::string::npos,
                    "message \"" << message << "\" lacks \"" << needle << "\"");
  } catch (const std::exception& e) {
    FAIL_CHECK("threw " << class_name_of(e) << " instead of " << class_name<E>() << ": " << std::string(e.what()));
  }
}

#define CHECK_OP_ERROR(error_type, expression, ...) \
  check_error<error_type>(#expression, [&] { (void)(expression); }, {__VA_ARGS__})

using tmod::dtype_error;
using tmod::shape_error;
using tmod::value_error;

const Tensor ints = tmod::zeros({2, 3}, tmod::DType::int32);
const Tensor undefined;

TEST_CASE("functional errors: elementwise ops and operators") {
  const Tensor a = tmod::ones({2, 3}), b = tmod::ones({4});
  CHECK_OP_ERROR(shape_error, F::add(a, b), "elemwise.add", "(2, 3)", "(4,)");
  CHECK_OP_ERROR(shape_error, F::maximum(b, a), "elemwise.maximum", "(4,)", "(2, 3)");
  CHECK_OP_ERROR(shape_error, a + b, "__add__", "(2, 3)", "(4,)");
  CHECK_OP_ERROR(shape_error, a - b, "__sub__", "(2, 3)", "(4,)");
  CHECK_OP_ERROR(shape_error, a * b, "__mul__", "(2, 3)", "(4,)");
  CHECK_OP_ERROR(shape_error, a / b, "__truediv__", "(2, 3)", "(4,)");
  CHECK_OP_ERROR(shape_error, F::sub(tmod::ones({3, 0}), tmod::ones({2})), "elemwise.sub", "(3, 0)", "(2,)");

  Tensor c = tmod::ones({3, 1});
  CHECK_OP_ERROR(shape_error, c += tmod::ones({1, 4}), "__iadd__", "(3, 1)", "(1, 4)");
  CHECK_OP_ERROR(shape_error, c /= tmod::ones({5}), "__itruediv__", "(3, 1)", "(5,)");

  CHECK_OP_ERROR(dtype_error, F::relu(ints), "nn.relu", "int32", "(2, 3)");
  CHECK_OP_ERROR(dtype_error, F::exp(ints), "elemwise.exp", "int32");
  CHECK_OP_ERROR(dtype_error, F::add(a, ints), "elemwise.add", "int32");
  CHECK_OP_ERROR(dtype_error, F::mul(2.5f, ints), "elemwise.mul", "int32");  // a whole number is an integer operand
  CHECK_OP_ERROR(dtype_error, ints + a, "__add__", "int32");
  CHECK_OP_ERROR(dtype_error, 1.5f - ints, "__rsub__", "int32");
  CHECK_OP_ERROR(dtype_error, -ints, "__neg__", "int32");

  CHECK_OP_ERROR(value_error, F::relu(undefined), "nn.relu", "undefined");
  CHECK_OP_ERROR(value_error, F::sigmoid(undefined), "nn.sigmoid", "undefined");
  CHECK_OP_ERROR(value_error, F::add(undefined, a), "elemwise.add", "undefined");
  CHECK_OP_ERROR(value_error, F::div(1.f, undefined), "elemwise.div", "undefined");
  CHECK_OP_ERROR(value_error, undefined * 2.f, "__mul__", "undefined");
  CHECK_OP_ERROR(value_error, -undefined, "__neg__", "undefined");
}

TEST_CASE("functional errors: matmul and linear") {
  const Tensor a = tmod::ones({2, 3}), b = tmod::ones({4, 5});
  CHECK_OP_ERROR(shape_error, F::matmul(a, b), "math.matmul", "(2, 3)", "(4, 5)");
  CHECK_OP_ERROR(shape_error, F::matmul(a, tmod::ones({2, 3}), {.transpose_a = false}), "math.matmul", "(2, 3)");
  CHECK_OP_ERROR(shape_error, F::matmul(tmod::ones({3, 2}), tmod::ones({2, 3}), {.transpose_a = true}), "math.matmul",
                 "(3, 2)", "(2, 3)");
  CHECK_OP_ERROR(shape_error, F::matmul(tmod::ones({3}), tmod::ones({4})), "math.matmul", "(3,)", "(4,)");
  CHECK_OP_ERROR(shape_error, F::matmul(tmod::ones({2, 3, 4}), tmod::ones({3, 4, 5})), "math.matmul", "(2, 3, 4)",
                 "(3, 4, 5)");
  CHECK_OP_ERROR(shape_error, F::matmul(tmod::scalar_tensor(1.f), b), "math.matmul", "()");
  CHECK_OP_ERROR(dtype_error, F::matmul(a, ints), "math.matmul", "inp2", "int32");
  CHECK_OP_ERROR(value_error, F::matmul(undefined, b), "math.matmul", "undefined");

  const Tensor x = tmod::ones({4, 5}), w = tmod::ones({3, 6});
  CHECK_OP_ERROR(shape_error, F::linear(x, w), "nn.linear", "(4, 5)", "(3, 6)");
  CHECK_OP_ERROR(shape_error, F::linear(x, tmod::ones({5})), "nn.linear", "(4, 5)", "(5,)");
  CHECK_OP_ERROR(shape_error, F::linear(x, tmod::ones({3, 5}), tmod::ones({4})), "nn.linear", "(4,)", "(3, 5)");
  CHECK_OP_ERROR(shape_error, F::linear(x, tmod::ones({3, 5}), tmod::ones({1, 3})), "nn.linear", "(1, 3)");
  CHECK_OP_ERROR(shape_error, F::linear(tmod::scalar_tensor(1.f), tmod::ones({3, 1})), "nn.linear", "()");
  CHECK_OP_ERROR(dtype_error, F::linear(ints, tmod::ones({4, 3})), "nn.linear", "inp", "int32");
  CHECK_OP_ERROR(dtype_error, F::linear(a, tmod::ones({4, 3}), tmod::zeros({4}, tmod::DType::int32)), "nn.linear",
                 "bias", "int32");
  CHECK_OP_ERROR(value_error, F::linear(a, undefined), "nn.linear", "weight", "undefined");
}

TEST_CASE("functional errors: conv2d") {
  const Tensor x = tmod::ones({1, 3, 5, 5}), w = tmod::ones({4, 3, 3, 3});
  CHECK_OP_ERROR(shape_error, F::conv2d(x, tmod::ones({4, 2, 3, 3})), "nn.conv2d", "(1, 3, 5, 5)", "(4, 2, 3, 3)");
  CHECK_OP_ERROR(shape_error, F::conv2d(tmod::ones({1, 4, 5, 5}), tmod::ones({6, 3, 3, 3}), {.groups = 2}), "nn.conv2d",
                 "(1, 4, 5, 5)", "(6, 3, 3, 3)");
  CHECK_OP_ERROR(shape_error, F::conv2d(x, w, tmod::ones({5})), "nn.conv2d", "(5,)");
  CHECK_OP_ERROR(shape_error, F::conv2d(x, w, tmod::ones({4, 1})), "nn.conv2d", "(4, 1)");
  CHECK_OP_ERROR(shape_error, F::conv2d(tmod::ones({1, 4, 5, 5}), tmod::ones({5, 2, 3, 3}), {.groups = 2}), "nn.conv2d",
                 "(5, 2, 3, 3)");
  CHECK_OP_ERROR(shape_error, F::conv2d(tmod::ones({3, 5, 5}), w), "nn.conv2d", "(3, 5, 5)");
  CHECK_OP_ERROR(shape_error, F::conv2d(x, tmod::ones({4, 3, 3})), "nn.conv2d", "(4, 3, 3)");
  CHECK_OP_ERROR(shape_error, F::conv2d(tmod::ones({1, 3, 2, 2}), w), "nn.conv2d", "(2, 2)", "(3, 3)");
  CHECK_OP_ERROR(value_error, F::conv2d(x, w, {.stride = 0}), "nn.conv2d", "stride");
  CHECK_OP_ERROR(value_error, F::conv2d(x, w, {.padding = {0, -1}}), "nn.conv2d", "padding");
  CHECK_OP_ERROR(value_error, F::conv2d(x, w, {.dilation = 0}), "nn.conv2d", "dilation");
  CHECK_OP_ERROR(value_error, F::conv2d(x, w, {.groups = 0}), "nn.conv2d", "groups");
  CHECK_OP_ERROR(dtype_error, F::conv2d(tmod::zeros({1, 3, 5, 5}, tmod::DType::int32), w), "nn.conv2d", "inp", "int32");
  CHECK_OP_ERROR(dtype_error, F::conv2d(x, w, tmod::zeros({4}, tmod::DType::int32)), "nn.conv2d", "bias", "int32");
  CHECK_OP_ERROR(value_error, F::conv2d(x, undefined), "nn.conv2d", "weight", "undefined");
}

TEST_CASE("functional errors: batch_norm") {
  const Tensor x = tmod::ones({2, 3, 4, 4}), mean = tmod::zeros({3}), var = tmod::ones({3});
  CHECK_OP_ERROR(shape_error, F::batch_norm(tmod::ones({5}), tmod::zeros({5}), tmod::ones({5})), "nn.batch_norm",
                 "(5,)");
  CHECK_OP_ERROR(shape_error, F::batch_norm(x, tmod::zeros({4}), var), "nn.batch_norm", "running_mean", "(4,)",
                 "(2, 3, 4, 4)");
  CHECK_OP_ERROR(shape_error, F::batch_norm(x, mean, var, tmod::ones({3, 1})), "nn.batch_norm", "weight", "(3, 1)");
  CHECK_OP_ERROR(shape_error, F::batch_norm(x, mean, var, tmod::ones({3}), tmod::ones({2})), "nn.batch_norm", "bias",
                 "(2,)");
  CHECK_OP_ERROR(value_error, F::batch_norm(x, tmod::none, tmod::none), "nn.batch_norm", "running_mean");
  CHECK_OP_ERROR(value_error, F::batch_norm(x, mean, tmod::none, tmod::none, tmod::none, {.training = true}),
                 "nn.batch_norm", "running_var");
  // PyTorch: "expected more than 1 value per channel when training"
  CHECK_OP_ERROR(value_error, F::batch_norm(tmod::ones({1, 3}), tmod::none, tmod::none, tmod::none, tmod::none,
                                            {.training = true}),
                 "nn.batch_norm", "more than 1 value");
  CHECK_OP_ERROR(dtype_error, F::batch_norm(x, tmod::zeros({3}, tmod::DType::int32), var), "nn.batch_norm",
                 "running_mean", "int32");
  CHECK_OP_ERROR(value_error, F::batch_norm(undefined, mean, var), "nn.batch_norm", "undefined");
}

TEST_CASE("functional errors: pooling") {
  const Tensor x = tmod::ones({1, 2, 3, 3});
  // (the pooling messages write extents as HxW)
  CHECK_OP_ERROR(shape_error, F::max_pool2d(x, 5), "nn.max_pool2d", "5x5", "3x3");
  CHECK_OP_ERROR(shape_error, F::avg_pool2d(x, {2, 4}), "nn.avg_pool2d", "2x4", "3x3");
  CHECK_OP_ERROR(shape_error, F::max_pool2d(x, 3, {.dilation = 2}), "nn.max_pool2d", "5x5", "3x3");
  CHECK_OP_ERROR(shape_error, F::max_pool2d(tmod::ones({2, 3, 3}), 2), "nn.max_pool2d", "(2, 3, 3)");
  CHECK_OP_ERROR(shape_error, F::avg_pool2d(tmod::ones({2, 3, 3}), 2), "nn.avg_pool2d", "(2, 3, 3)");
  CHECK_OP_ERROR(value_error, F::max_pool2d(x, 0), "nn.max_pool2d", "kernel");
  CHECK_OP_ERROR(value_error, F::max_pool2d(x, 2, {.stride = 0}), "nn.max_pool2d", "stride");
  CHECK_OP_ERROR(value_error, F::max_pool2d(x, 3, {.padding = 2}), "nn.max_pool2d", "padding");
  CHECK_OP_ERROR(value_error, F::avg_pool2d(x, 2, {.padding = -1}), "nn.avg_pool2d", "padding");
  CHECK_OP_ERROR(shape_error, F::adaptive_avg_pool2d(tmod::ones({2, 3, 3}), 2), "nn.adaptive_avg_pool2d", "(2, 3, 3)");
  CHECK_OP_ERROR(value_error, F::adaptive_avg_pool2d(x, {-1, 2}), "nn.adaptive_avg_pool2d", "(-1, 2)");
  CHECK_OP_ERROR(shape_error, F::adaptive_avg_pool2d(tmod::ones({1, 2, 0, 4}), 2), "nn.adaptive_avg_pool2d",
                 "(1, 2, 0, 4)");
  CHECK_OP_ERROR(dtype_error, F::max_pool2d(tmod::zeros({1, 1, 2, 2}, tmod::DType::int32), 2), "nn.max_pool2d",
                 "int32");
  CHECK_OP_ERROR(dtype_error, F::adaptive_avg_pool2d(tmod::zeros({1, 1, 2, 2}, tmod::DType::int32), 1),
                 "nn.adaptive_avg_pool2d", "int32");
  CHECK_OP_ERROR(value_error, F::avg_pool2d(undefined, 2), "nn.avg_pool2d", "undefined");
}

TEST_CASE("functional errors: softmax and shape ops") {
  const Tensor x = tmod::ones({2, 3, 4});
  CHECK_OP_ERROR(value_error, F::softmax(tmod::ones({3, 4}), {.axis = 2}), "nn.softmax", "axis 2", "rank 2");
  CHECK_OP_ERROR(value_error, F::softmax(tmod::ones({3, 4}), {.axis = -3}), "nn.softmax", "axis -3");
  // Like PyTorch, rank 0 takes axis 0 or -1 only.
  CHECK_OP_ERROR(value_error, F::softmax(tmod::scalar_tensor(1.f), {.axis = 1}), "nn.softmax", "axis 1");
  CHECK_OP_ERROR(dtype_error, F::softmax(ints), "nn.softmax", "int32");
  CHECK_OP_ERROR(value_error, F::softmax(undefined), "nn.softmax", "undefined");

  CHECK_OP_ERROR(value_error, F::flatten(x, {.start_axis = 3}), "tensor.flatten", "axis 3");
  CHECK_OP_ERROR(value_error, F::flatten(x, {.start_axis = 2, .end_axis = 1}), "tensor.flatten", "(2, 3, 4)");
  CHECK_OP_ERROR(value_error, F::flatten(undefined), "tensor.flatten", "undefined");

  CHECK_OP_ERROR(shape_error, F::reshape(x, {5, 5}), "tensor.reshape", "(2, 3, 4)", "(5, 5)");
  CHECK_OP_ERROR(shape_error, F::reshape(x, {-1, 2, -1}), "tensor.reshape", "(2, 3, 4)", "(-1, 2, -1)");
  CHECK_OP_ERROR(shape_error, F::reshape(x, {5, -1}), "tensor.reshape", "(2, 3, 4)", "(5, -1)");
  CHECK_OP_ERROR(shape_error, F::reshape(x, {-2, -12}), "tensor.reshape", "(-2, -12)");
  CHECK_OP_ERROR(value_error, F::reshape(undefined, {1}), "tensor.reshape", "undefined");

  CHECK_OP_ERROR(value_error, F::transpose(tmod::ones({3, 4}), {0, 2}), "tensor.transpose", "(0, 2)", "(3, 4)");
  CHECK_OP_ERROR(value_error, F::transpose(tmod::ones({3, 4}), {0, 0}), "tensor.transpose", "(0, 0)", "(3, 4)");
  CHECK_OP_ERROR(value_error, F::transpose(x, {1, 0}), "tensor.transpose", "(1, 0)", "(2, 3, 4)");
  CHECK_OP_ERROR(dtype_error, F::transpose(ints, {1, 0}), "tensor.transpose", "int32");
  CHECK_OP_ERROR(value_error, F::transpose(undefined, {}), "tensor.transpose", "undefined");

  const Tensor p = tmod::ones({2, 3}), q = tmod::ones({2, 4});
  CHECK_OP_ERROR(shape_error, F::concat({p, q}), "tensor.concat", "(2, 3)", "(2, 4)");
  CHECK_OP_ERROR(shape_error, F::concat({p, p, tmod::ones({2, 3, 1})}, {.axis = 1}), "tensor.concat", "(2, 3, 1)");
  CHECK_OP_ERROR(value_error, F::concat({p, q}, {.axis = 2}), "tensor.concat", "axis 2");
  CHECK_OP_ERROR(value_error, F::concat(std::vector<Tensor>{}), "tensor.concat");
  CHECK_OP_ERROR(dtype_error, F::concat({p, ints}), "tensor.concat", "inps[1]", "int32");
  CHECK_OP_ERROR(value_error, F::concat({p, undefined}), "tensor.concat", "inps[1]", "undefined");
}

TEST_CASE("functional errors: every class derives from tracemod::error") {
  CHECK_THROWS_AS(F::add(tmod::ones({2}), tmod::ones({3})), tmod::error);
  CHECK_THROWS_AS(F::relu(ints), tmod::error);
  CHECK_THROWS_AS(F::softmax(tmod::ones({2}), {.axis = 1}), tmod::error);
  CHECK_THROWS_AS(F::relu(undefined), std::runtime_error);
}

}  // namespace

}  // namespace tmod_test_functional_errors
