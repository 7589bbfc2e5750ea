// The math ops (functional/math_unary.hpp's table, elu, celu, selu, thresholded_relu, log_softmax and
// the reductions beyond sum, mean, max and min) in every mode: eager against a scalar reference in
// double, and trace_module (printed), the interpreter, save -> load, ONNX export -> import and, for
// the elementwise ones, elemwise.fused, each with the eager bits.
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tmod_test_onnx_math_ops {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Tensor;

/// op(x * 0.5) * 2: two more elementwise ops around the op, which FuseElemwise fuses with it.
template <class Op>
struct Elementwise : tmod::Module {
  TM_MODULE(Elementwise)
  auto forward(const auto& x) const { return Op{}(x * 0.5f) * 2.0f; }
};

/// op(x, axis 1, keepdims) for a reduction; op(x, 1) for log_softmax, hardmax, argmax and argmin.
template <class Op>
struct AlongAxis : tmod::Module {
  TM_MODULE(AlongAxis)
  auto forward(const auto& x) const {
    if constexpr (std::is_same_v<typename Op::params, F::reduce_params>)
      return Op{}(x, F::int_list{1}, true);
    else
      return Op{}(x, 1);
  }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  if (a.dtype() == tmod::DType::int32)
    return std::memcmp(a.data<std::int32_t>(), b.data<std::int32_t>(), a.nbytes()) == 0;
  return std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

/// The modes beyond eager of `net` on x, each checked for the bits of `eager`; the ONNX model must
/// hold a node of `onnx_type`, and with `fuses` FuseElemwise makes one program calling `name`.
template <class Net>
void check_modes(const Net& net, const Tensor& x, const Tensor& eager, std::string_view target, std::string_view onnx_type,
                 std::string_view name, bool fuses) {
  const tmod::TracedModule traced = tmod::trace_module(net, x);
  std::ostringstream printed;
  printed << traced.graph();
  CAPTURE(printed.str());
  CHECK(printed.str().find(std::string(target) + "(") != std::string::npos);
  CHECK(same_bits(traced(x).tensor(), eager));

  std::ostringstream os;
  tmod::save(traced, os);
  const std::string bytes = os.str();
  const tmod::TracedModule loaded = tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
  CHECK(same_bits(loaded(x).tensor(), eager));

  const auto model = tmod::onnx::to_onnx(traced, {.opset = 13});
  CHECK_NOTHROW(tmod::onnx::proto::checker::check_model(model));
  int nodes = 0;
  for (const auto& n : model.graph().node()) nodes += n.op_type() == onnx_type;
  CHECK(nodes == 1);
  const tmod::TracedModule imported = tmod::onnx::import_model(model, {.dims = {{"batch", x.shape()[0]}}});
  CHECK(same_bits(imported(x).tensor(), eager));

  if (fuses) {
    const tmod::TracedModule fused = tmod::optimize(traced, {"FuseElemwise"});
    std::ostringstream p;
    p << fused.graph();
    CAPTURE(p.str());
    CHECK(p.str().find("elemwise.fused[" + std::string(name) + "(x0 * 0.5") != std::string::npos);  // alpha follows
    CHECK(p.str().find(std::string(target) + "(") == std::string::npos);
    CHECK(same_bits(fused(x).tensor(), eager));
  }
}

/// An elementwise op f with reference ref over inputs in [lo, hi] (before the halving).
template <class Op>
void check_elementwise(std::string_view onnx_type, double lo, double hi, const std::function<double(double)>& ref) {
  CAPTURE(Op::target);
  Elementwise<Op> net;
  const Tensor x = tmod::uniform({3, 7}, static_cast<float>(lo), static_cast<float>(hi), 7);
  const Tensor eager = net(x);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double want = 2.0 * static_cast<double>(static_cast<float>(ref(0.5 * x.data<float>()[i])));
    CHECK(eager.data<float>()[i] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
  }
  check_modes(net, x, eager, Op::target, onnx_type, Op::name, true);
}

/// A reduction (or log_softmax) along axis 1 of a (3, 5, 4) input, against ref over each column.
template <class Op>
void check_along_axis(std::string_view onnx_type, const std::function<double(const std::vector<double>&, double)>& ref) {
  CAPTURE(Op::target);
  AlongAxis<Op> net;
  const Tensor x = tmod::uniform({3, 5, 4}, 0.25f, 1.5f, 9);
  const Tensor eager = net(x);
  const bool keeps_axis = eager.shape() == x.shape();
  for (std::int64_t a = 0; a < 3; ++a)
    for (std::int64_t c = 0; c < 4; ++c) {
      std::vector<double> column;
      for (std::int64_t k = 0; k < 5; ++k) column.push_back(x.data<float>()[(a * 5 + k) * 4 + c]);
      for (std::int64_t k = 0; k < (keeps_axis ? 5 : 1); ++k) {
        const float got = eager.data<float>()[keeps_axis ? (a * 5 + k) * 4 + c : a * 4 + c];
        CHECK(got == doctest::Approx(ref(column, column[static_cast<std::size_t>(k)])).epsilon(1e-5));
      }
    }
  check_modes(net, x, eager, Op::target, onnx_type, Op::name, false);
}

/// argmax / argmin along axis 1 of a (3, 5, 4) input (with ties: the values are multiples of 1/4),
/// against the first or last extremum of each column.
template <class Op>
void check_arg(bool select_last) {
  CAPTURE(Op::target);
  CAPTURE(select_last);
  const Tensor x = F::floor(tmod::uniform({3, 5, 4}, -1.f, 1.f, 13) * 4.0f) * 0.25f;
  const Tensor got = Op{}(x, 1, false, {.select_last_index = select_last});
  REQUIRE(got.shape() == tmod::Shape{3, 4});
  REQUIRE(got.dtype() == tmod::DType::int32);
  constexpr bool min = std::is_same_v<Op, F::argmin_fn>;
  for (std::int64_t a = 0; a < 3; ++a)
    for (std::int64_t c = 0; c < 4; ++c) {
      std::int32_t best = 0;
      for (std::int32_t k = 1; k < 5; ++k) {
        const float v = x.data<float>()[(a * 5 + k) * 4 + c], m = x.data<float>()[(a * 5 + best) * 4 + c];
        if ((min ? v < m : v > m) || (select_last && v == m)) best = k;
      }
      CHECK(got.data<std::int32_t>()[a * 4 + c] == best);
    }
  AlongAxis<Op> net;
  check_modes(net, x, net(x), Op::target, Op::onnx_type, Op::name, false);
}

double sum_of(const std::vector<double>& v, double (*f)(double)) {
  double s = 0;
  for (double e : v) s += f(e);
  return s;
}

}  // namespace

TEST_CASE("math ops: the unary math table in every mode") {
  check_elementwise<F::abs_fn>("Abs", -3, 3, [](double v) { return std::abs(v); });
  check_elementwise<F::ceil_fn>("Ceil", -5, 5, [](double v) { return std::ceil(v); });
  check_elementwise<F::floor_fn>("Floor", -5, 5, [](double v) { return std::floor(v); });
  check_elementwise<F::round_fn>("Round", -5, 5, [](double v) { return std::nearbyint(v); });
  check_elementwise<F::sign_fn>("Sign", -3, 3, [](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; });
  check_elementwise<F::sin_fn>("Sin", -6, 6, [](double v) { return std::sin(v); });
  check_elementwise<F::cos_fn>("Cos", -6, 6, [](double v) { return std::cos(v); });
  check_elementwise<F::tan_fn>("Tan", -2.4, 2.4, [](double v) { return std::tan(v); });
  check_elementwise<F::asin_fn>("Asin", -1.8, 1.8, [](double v) { return std::asin(v); });
  check_elementwise<F::acos_fn>("Acos", -1.8, 1.8, [](double v) { return std::acos(v); });
  check_elementwise<F::atan_fn>("Atan", -8, 8, [](double v) { return std::atan(v); });
  check_elementwise<F::sinh_fn>("Sinh", -6, 6, [](double v) { return std::sinh(v); });
  check_elementwise<F::cosh_fn>("Cosh", -6, 6, [](double v) { return std::cosh(v); });
  check_elementwise<F::asinh_fn>("Asinh", -8, 8, [](double v) { return std::asinh(v); });
  check_elementwise<F::acosh_fn>("Acosh", 2.2, 9, [](double v) { return std::acosh(v); });
  check_elementwise<F::atanh_fn>("Atanh", -1.8, 1.8, [](double v) { return std::atanh(v); });
  check_elementwise<F::log_fn>("Log", 0.01, 9, [](double v) { return std::log(v); });
  check_elementwise<F::softplus_fn>("Softplus", -60, 60, [](double v) { return std::log1p(std::exp(v)); });
}

TEST_CASE("math ops: elu, celu, selu and thresholded_relu in every mode") {
  check_elementwise<F::elu_fn>("Elu", -4, 4, [](double v) { return v > 0 ? v : std::expm1(v); });
  check_elementwise<F::celu_fn>("Celu", -4, 4, [](double v) { return v > 0 ? v : std::expm1(v); });
  check_elementwise<F::thresholded_relu_fn>("ThresholdedRelu", -4, 4, [](double v) { return v > 1 ? v : 0.0; });
  check_elementwise<F::selu_fn>("Selu", -4, 4, [](double v) {
    return 1.0507009873554805 * (v > 0 ? v : 1.6732632423543772 * std::expm1(v));
  });
  // alpha is an operand: a number other than the default reaches the kernel and the ONNX attribute.
  const Tensor x = tmod::uniform({2, 5}, -3.f, 3.f, 11);
  const Tensor y = F::celu(x, 2.0);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.data<float>()[i];
    CHECK(y.data<float>()[i] == doctest::Approx(v > 0 ? v : 2.0 * std::expm1(v / 2.0)).epsilon(1e-5));
  }
}

TEST_CASE("math ops: log_softmax and the reductions in every mode") {
  check_along_axis<F::log_softmax_fn>("LogSoftmax", [](const std::vector<double>& col, double v) {
    return v - std::log(sum_of(col, [](double e) { return std::exp(e); }));
  });
  check_along_axis<F::prod_fn>("ReduceProd", [](const std::vector<double>& col, double) {
    double p = 1;
    for (double e : col) p *= e;
    return p;
  });
  check_along_axis<F::sum_square_fn>("ReduceSumSquare",
                                     [](const std::vector<double>& col, double) { return sum_of(col, [](double e) { return e * e; }); });
  check_along_axis<F::norm_l1_fn>("ReduceL1",
                                  [](const std::vector<double>& col, double) { return sum_of(col, [](double e) { return std::abs(e); }); });
  check_along_axis<F::norm_l2_fn>("ReduceL2", [](const std::vector<double>& col, double) {
    return std::sqrt(sum_of(col, [](double e) { return e * e; }));
  });
  check_along_axis<F::log_sum_fn>("ReduceLogSum",
                                  [](const std::vector<double>& col, double) { return std::log(sum_of(col, [](double e) { return e; })); });
  check_along_axis<F::logsumexp_fn>("ReduceLogSumExp", [](const std::vector<double>& col, double) {
    return std::log(sum_of(col, [](double e) { return std::exp(e); }));
  });
  check_along_axis<F::hardmax_fn>("Hardmax", [](const std::vector<double>& col, double v) {
    return v == *std::max_element(col.begin(), col.end()) ? 1.0 : 0.0;
  });
  // logsumexp of large values does not overflow; an empty reduction is -inf.
  const Tensor big = tmod::tensor({1000.f, 1000.f});
  CHECK(F::logsumexp(big).data<float>()[0] == doctest::Approx(1000.0 + std::log(2.0)));
  const Tensor empty = tmod::zeros({2, 0});
  const Tensor e = F::logsumexp(empty, F::int_list{1});
  CHECK(e.data<float>()[0] == -std::numeric_limits<float>::infinity());
  CHECK(F::prod(empty, F::int_list{1}).data<float>()[1] == 1.0f);
}

TEST_CASE("math ops: argmax and argmin give int32 indices in every mode") {
  for (const bool last : {false, true}) {
    check_arg<F::argmax_fn>(last);
    check_arg<F::argmin_fn>(last);
  }
  CHECK(F::argmax(tmod::tensor({1.f, 7.f, 7.f, -2.f})).data<std::int32_t>()[0] == 1);
  CHECK_THROWS_AS((void)F::argmax(tmod::zeros({2, 0}), 1), tmod::shape_error);
}

}  // namespace tmod_test_onnx_math_ops
