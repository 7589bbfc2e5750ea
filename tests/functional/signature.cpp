// The op definitions: printed target, auto-naming base, call kind, operands, and the non-tensor
// params in canonical order with their Python spelling (what a graph prints: (1, 1), None, True,
// 1e-05), checked against MegEngine's names and Python's repr.
#include <tracemod/functional.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tmod_test_functional_signature {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using F::call_kind;
using F::operand_kind;

// Every op is a complete definition.
static_assert(F::op_definition<F::relu_fn> && F::op_definition<F::relu6_fn> && F::op_definition<F::neg_fn> &&
              F::op_definition<F::exp_fn> && F::op_definition<F::sigmoid_fn> && F::op_definition<F::tanh_fn>);
static_assert(F::op_definition<F::add_fn> && F::op_definition<F::sub_fn> && F::op_definition<F::mul_fn> &&
              F::op_definition<F::div_fn> && F::op_definition<F::minimum_fn> && F::op_definition<F::maximum_fn>);
static_assert(F::op_definition<F::method_add_fn> && F::op_definition<F::method_radd_fn> &&
              F::op_definition<F::method_sub_fn> && F::op_definition<F::method_rsub_fn> &&
              F::op_definition<F::method_mul_fn> && F::op_definition<F::method_rmul_fn> &&
              F::op_definition<F::method_truediv_fn> && F::op_definition<F::method_rtruediv_fn> &&
              F::op_definition<F::method_neg_fn>);
static_assert(F::op_definition<F::matmul_fn> && F::op_definition<F::linear_fn> && F::op_definition<F::conv2d_fn> &&
              F::op_definition<F::batch_norm_fn> && F::op_definition<F::max_pool2d_fn> &&
              F::op_definition<F::avg_pool2d_fn> && F::op_definition<F::adaptive_avg_pool2d_fn> &&
              F::op_definition<F::softmax_fn> && F::op_definition<F::flatten_fn> && F::op_definition<F::reshape_fn> &&
              F::op_definition<F::transpose_fn> && F::op_definition<F::concat_fn>);

template <class Op>
void check_identity(std::string_view name, std::string_view target, call_kind kind) {
  CAPTURE(target);
  CHECK(Op::name == name);
  CHECK(Op::target == target);
  CHECK(Op::kind == kind);
}

TEST_CASE("functional signature: printed targets, names and call kinds (MegEngine's)") {
  check_identity<F::relu_fn>("relu", "nn.relu", call_kind::function);
  check_identity<F::relu6_fn>("relu6", "nn.relu6", call_kind::function);
  check_identity<F::sigmoid_fn>("sigmoid", "nn.sigmoid", call_kind::function);
  check_identity<F::neg_fn>("neg", "elemwise.neg", call_kind::function);
  check_identity<F::exp_fn>("exp", "elemwise.exp", call_kind::function);
  check_identity<F::tanh_fn>("tanh", "elemwise.tanh", call_kind::function);
  check_identity<F::add_fn>("add", "elemwise.add", call_kind::function);
  check_identity<F::sub_fn>("sub", "elemwise.sub", call_kind::function);
  check_identity<F::mul_fn>("mul", "elemwise.mul", call_kind::function);
  check_identity<F::div_fn>("div", "elemwise.div", call_kind::function);
  check_identity<F::minimum_fn>("minimum", "elemwise.minimum", call_kind::function);
  check_identity<F::maximum_fn>("maximum", "elemwise.maximum", call_kind::function);
  check_identity<F::method_add_fn>("__add__", "__add__", call_kind::method);
  check_identity<F::method_radd_fn>("__radd__", "__radd__", call_kind::method);
  check_identity<F::method_sub_fn>("__sub__", "__sub__", call_kind::method);
  check_identity<F::method_rsub_fn>("__rsub__", "__rsub__", call_kind::method);
  check_identity<F::method_mul_fn>("__mul__", "__mul__", call_kind::method);
  check_identity<F::method_rmul_fn>("__rmul__", "__rmul__", call_kind::method);
  check_identity<F::method_truediv_fn>("__truediv__", "__truediv__", call_kind::method);
  check_identity<F::method_rtruediv_fn>("__rtruediv__", "__rtruediv__", call_kind::method);
  check_identity<F::method_neg_fn>("__neg__", "__neg__", call_kind::method);
  check_identity<F::matmul_fn>("matmul", "math.matmul", call_kind::function);
  check_identity<F::linear_fn>("linear", "nn.linear", call_kind::function);
  check_identity<F::conv2d_fn>("conv2d", "nn.conv2d", call_kind::function);
  check_identity<F::batch_norm_fn>("batch_norm", "nn.batch_norm", call_kind::function);
  check_identity<F::max_pool2d_fn>("max_pool2d", "nn.max_pool2d", call_kind::function);
  check_identity<F::avg_pool2d_fn>("avg_pool2d", "nn.avg_pool2d", call_kind::function);
  check_identity<F::adaptive_avg_pool2d_fn>("adaptive_avg_pool2d", "nn.adaptive_avg_pool2d", call_kind::function);
  check_identity<F::softmax_fn>("softmax", "nn.softmax", call_kind::function);
  check_identity<F::flatten_fn>("flatten", "tensor.flatten", call_kind::function);
  check_identity<F::reshape_fn>("reshape", "tensor.reshape", call_kind::function);
  check_identity<F::transpose_fn>("transpose", "tensor.transpose", call_kind::function);
  check_identity<F::concat_fn>("concat", "tensor.concat", call_kind::function);
}

using operand_list = std::vector<std::pair<std::string_view, operand_kind>>;

template <class Op>
operand_list operands_of() {
  operand_list out;
  for (const F::operand& o : Op::operands) out.emplace_back(o.name, o.kind);
  return out;
}

TEST_CASE("functional signature: operands, in order, with their kinds") {
  constexpr auto tensor = operand_kind::tensor, optional = operand_kind::optional_tensor,
                 either = operand_kind::tensor_or_scalar;
  CHECK(operands_of<F::relu_fn>() == operand_list{{"inp", tensor}});
  CHECK(operands_of<F::add_fn>() == operand_list{{"x", either}, {"y", either}});
  CHECK(operands_of<F::method_add_fn>() == operand_list{{"self", tensor}, {"other", either}});
  CHECK(operands_of<F::method_rtruediv_fn>() == operand_list{{"self", tensor}, {"other", either}});
  CHECK(operands_of<F::method_neg_fn>() == operand_list{{"self", tensor}});
  CHECK(operands_of<F::matmul_fn>() == operand_list{{"inp1", tensor}, {"inp2", tensor}});
  CHECK(operands_of<F::linear_fn>() == operand_list{{"inp", tensor}, {"weight", tensor}, {"bias", optional}});
  CHECK(operands_of<F::conv2d_fn>() == operand_list{{"inp", tensor}, {"weight", tensor}, {"bias", optional}});
  CHECK(operands_of<F::batch_norm_fn>() == operand_list{{"inp", tensor},
                                                         {"running_mean", optional},
                                                         {"running_var", optional},
                                                         {"weight", optional},
                                                         {"bias", optional}});
  CHECK(operands_of<F::max_pool2d_fn>() == operand_list{{"inp", tensor}});
  CHECK(operands_of<F::concat_fn>() == operand_list{{"inps", operand_kind::tensor_list}});
  CHECK(F::method_radd_fn::reflected);
  CHECK_FALSE(F::method_add_fn::reflected);
}

struct param_entry {
  std::string name, value;
  bool keyword_only;
  friend bool operator==(const param_entry&, const param_entry&) = default;
};

template <class Op>
std::vector<param_entry> params_of(const typename Op::params& p) {
  std::vector<param_entry> out;
  F::for_each_param<Op>(p, [&](std::string_view name, const auto& value, bool keyword_only) {
    out.push_back({std::string(name), F::repr(value), keyword_only});
  });
  return out;
}

TEST_CASE("functional signature: for_each_param visits positional params, then keyword-only ones") {
  using v = std::vector<param_entry>;
  CHECK(params_of<F::conv2d_fn>({}) == v{{"stride", "(1, 1)", false},
                                         {"padding", "(0, 0)", false},
                                         {"dilation", "(1, 1)", false},
                                         {"groups", "1", false}});
  CHECK(params_of<F::batch_norm_fn>({}) ==
        v{{"training", "False", true}, {"momentum", "0.1", true}, {"eps", "1e-05", true}});
  CHECK(params_of<F::max_pool2d_fn>({.kernel_size = 3, .stride = 2}) == v{{"kernel_size", "(3, 3)", false},
                                                                           {"stride", "(2, 2)", false},
                                                                           {"padding", "(0, 0)", false},
                                                                           {"dilation", "(1, 1)", false},
                                                                           {"ceil_mode", "False", false}});
  CHECK(params_of<F::matmul_fn>({.transpose_b = true}) ==
        v{{"transpose_a", "False", false}, {"transpose_b", "True", false}});
  CHECK(params_of<F::flatten_fn>({.start_axis = 1}) == v{{"start_axis", "1", false}, {"end_axis", "-1", false}});
  CHECK(params_of<F::relu_fn>({}).empty());
  CHECK(params_of<F::linear_fn>({}).empty());
  CHECK(params_of<F::method_add_fn>({}).empty());

  CHECK(F::param_count_v<F::relu_fn> == 0);
  CHECK(F::param_count_v<F::add_fn> == 0);
  CHECK(F::param_count_v<F::matmul_fn> == 2);
  CHECK(F::param_count_v<F::conv2d_fn> == 4);
  CHECK(F::param_count_v<F::batch_norm_fn> == 3);
  CHECK(F::param_count_v<F::max_pool2d_fn> == 5);
  CHECK(F::param_count_v<F::avg_pool2d_fn> == 5);
  CHECK(F::param_count_v<F::adaptive_avg_pool2d_fn> == 1);
  CHECK(F::param_count_v<F::softmax_fn> == 1);
  CHECK(F::param_count_v<F::concat_fn> == 1);
}

TEST_CASE("functional signature: params_repr of defaults and of set values") {
  CHECK(F::params_repr<F::relu_fn>({}) == "");
  CHECK(F::params_repr<F::conv2d_fn>({}) == "stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1");
  CHECK(F::params_repr<F::conv2d_fn>({.stride = 2, .padding = {1, 2}, .groups = 4}) ==
        "stride=(2, 2), padding=(1, 2), dilation=(1, 1), groups=4");
  CHECK(F::params_repr<F::batch_norm_fn>({}) == "training=False, momentum=0.1, eps=1e-05");
  CHECK(F::params_repr<F::batch_norm_fn>({.training = true, .momentum = 0.3, .eps = 1e-3}) ==
        "training=True, momentum=0.3, eps=0.001");
  CHECK(F::params_repr<F::max_pool2d_fn>({}) ==
        "kernel_size=(1, 1), stride=None, padding=(0, 0), dilation=(1, 1), ceil_mode=False");
  CHECK(F::params_repr<F::max_pool2d_fn>({.kernel_size = {3, 2}, .stride = F::pair2{2, 1}, .ceil_mode = true}) ==
        "kernel_size=(3, 2), stride=(2, 1), padding=(0, 0), dilation=(1, 1), ceil_mode=True");
  CHECK(F::params_repr<F::avg_pool2d_fn>({}) ==
        "kernel_size=(1, 1), stride=None, padding=(0, 0), ceil_mode=False, count_include_pad=True");
  CHECK(F::params_repr<F::avg_pool2d_fn>({.kernel_size = 2, .count_include_pad = false}) ==
        "kernel_size=(2, 2), stride=None, padding=(0, 0), ceil_mode=False, count_include_pad=False");
  CHECK(F::params_repr<F::adaptive_avg_pool2d_fn>({}) == "oshp=(1, 1)");
  CHECK(F::params_repr<F::adaptive_avg_pool2d_fn>({.oshp = {7, 5}}) == "oshp=(7, 5)");
  CHECK(F::params_repr<F::softmax_fn>({}) == "axis=None");
  CHECK(F::params_repr<F::softmax_fn>({.axis = -1}) == "axis=-1");
  CHECK(F::params_repr<F::flatten_fn>({}) == "start_axis=0, end_axis=-1");
  CHECK(F::params_repr<F::reshape_fn>({.target_shape = {6, -1}}) == "target_shape=(6, -1)");
  CHECK(F::params_repr<F::reshape_fn>({.target_shape = {5}}) == "target_shape=(5,)");
  CHECK(F::params_repr<F::reshape_fn>({}) == "target_shape=()");
  CHECK(F::params_repr<F::transpose_fn>({.pattern = {0, 2, 3, 1}}) == "pattern=(0, 2, 3, 1)");
  CHECK(F::params_repr<F::concat_fn>({}) == "axis=0");
  CHECK(F::params_repr<F::matmul_fn>({}) == "transpose_a=False, transpose_b=False");
}

TEST_CASE("functional signature: params default to PyTorch's / MegEngine's") {
  const F::max_pool2d_fn::params mp{};
  CHECK_FALSE(mp.stride.has_value());  // None: the kernel size
  CHECK(mp.padding == F::pair2{0, 0});
  CHECK(mp.dilation == F::pair2{1, 1});
  CHECK_FALSE(mp.ceil_mode);
  const F::avg_pool2d_fn::params ap{};
  CHECK(ap.count_include_pad);
  CHECK_FALSE(ap.ceil_mode);
  const F::softmax_fn::params sp{};
  CHECK_FALSE(sp.axis.has_value());
  const F::flatten_fn::params fp{};
  CHECK(fp.start_axis == 0);
  CHECK(fp.end_axis == -1);
  const F::concat_fn::params cp{};
  CHECK(cp.axis == 0);
}

TEST_CASE("functional signature: repr of values is Python's") {
  CHECK(F::repr(std::int64_t{-3}) == "-3");
  CHECK(F::repr(7) == "7");
  CHECK(F::repr(true) == "True");
  CHECK(F::repr(false) == "False");
  CHECK(F::repr(tmod::none) == "None");
  CHECK(F::repr(F::pair2{3}) == "(3, 3)");
  CHECK(F::repr(F::pair2{1, -2}) == "(1, -2)");
  CHECK(F::repr(F::int_list{}) == "()");
  CHECK(F::repr(F::int_list{4}) == "(4,)");
  CHECK(F::repr(F::int_list{2, -1, 3}) == "(2, -1, 3)");
  CHECK(F::repr(std::optional<std::int64_t>{}) == "None");
  CHECK(F::repr(std::optional<std::int64_t>{-1}) == "-1");
  CHECK(F::repr(std::optional<F::pair2>{F::pair2{2}}) == "(2, 2)");
  CHECK(F::repr(std::string_view("default")) == "default");
}

TEST_CASE("functional signature: repr of doubles matches Python's float repr") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // (value, Python's repr(value))
  const std::pair<double, std::string_view> cases[] = {
      {0.1, "0.1"},
      {1e-05, "1e-05"},
      {1e16, "1e+16"},
      {0.0001, "0.0001"},
      {123.5, "123.5"},
      {-2.0, "-2.0"},
      {1.2345678901234568e+16, "1.2345678901234568e+16"},
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {100.0, "100.0"},
      {1e15, "1000000000000000.0"},
      {9999999999999998.0, "9999999999999998.0"},
      {5e-324, "5e-324"},
      {1.7976931348623157e+308, "1.7976931348623157e+308"},
      {0.1 + 0.2, "0.30000000000000004"},
      {2.5e-05, "2.5e-05"},
      {0.00012, "0.00012"},
      {1e22, "1e+22"},
      {-1.5e-07, "-1.5e-07"},
      {0.001, "0.001"},
      {0.9, "0.9"},
      {12345678.9, "12345678.9"},
      {1.0 / 3.0, "0.3333333333333333"},
      {inf, "inf"},
      {-inf, "-inf"},
      {nan, "nan"},
      {-nan, "nan"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.second);
    CHECK(F::repr(c.first) == c.second);
  }
}

}  // namespace

}  // namespace tmod_test_functional_signature
