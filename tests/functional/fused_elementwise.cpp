// elemwise.fused: parsing and printing of programs, the bits of the unfused ops (flat and
// broadcasting), thread counts, errors, and the registry entry.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/functional/registry.hpp>

#include "thread_counts.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace tmod_test_functional_fused_elementwise {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

std::string canonical(const std::string& text) { return F::fused_program::parse(text, "test").to_string(); }

}  // namespace

TEST_CASE("fused_program: parses with precedence and prints canonically") {
  // Constants print as Python's repr of the float: 1.0, 0.1.
  CHECK(canonical("relu(x0*0.5+1)") == "relu(x0 * 0.5 + 1.0)");
  CHECK(canonical("(x0 + x1) * x2") == "(x0 + x1) * x2");
  CHECK(canonical("x0 + (x1 * x2)") == "x0 + x1 * x2");
  CHECK(canonical("x0 - (x1 - x2)") == "x0 - (x1 - x2)");
  CHECK(canonical("(x0 - x1) - x2") == "x0 - x1 - x2");
  CHECK(canonical("-(x0 + 1)") == "-(x0 + 1.0)");
  CHECK(canonical("maximum(x0, minimum(x1, 6))") == "maximum(x0, minimum(x1, 6.0))");
  CHECK(canonical("sigmoid(tanh(exp(neg(relu6(x0)))))") == "sigmoid(tanh(exp(-relu6(x0))))");
  CHECK(canonical("x0 * -2.5 - -x1") == "x0 * -2.5 - -x1");
  CHECK(canonical("x0 * 0.1") == "x0 * 0.1");
  // The postfix code: x0 0.5 mul 1 add relu, each call naming its op's kernel.
  const F::fused_program p = F::fused_program::parse("relu(x0 * 0.5 + 1)", "test");
  using op = F::fused_program::opcode;
  const auto function = [&](std::size_t k) {
    REQUIRE(p.code()[k].op == op::call);
    return F::fused_functions::instance().at(static_cast<std::size_t>(p.code()[k].input)).name;
  };
  REQUIRE(p.code().size() == 6);
  CHECK(p.code()[0].op == op::input);
  CHECK(p.code()[1].value == 0.5f);
  CHECK(function(2) == "mul");
  CHECK(function(4) == "add");
  CHECK(function(5) == "relu");
  CHECK(p.inputs() == 1);
  for (const char* bad : {"", "x0 +", "relu(x0", "gelu(x0)", "x9", "minimum(x0)", "x0 x1", "(x0))"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS((void)F::fused_program::parse(bad, "test"), tmod::value_error);
  }
}

TEST_CASE("functional: elemwise.fused has the bits of the unfused ops, flat and broadcasting") {
  const Tensor x = tmod::randn({2, 3, 5, 7}, 1), y = tmod::randn({2, 3, 5, 7}, 2);
  const Tensor c = tmod::randn({3, 1, 1}, 3), row = tmod::randn({7}, 4), scalar = tmod::randn({}, 5);
  CHECK(same_bits(F::fused_elementwise(std::vector<Tensor>{x}, "relu(x0 * 0.5 + 1)"), F::relu(x * 0.5f + 1.0f)));
  CHECK(same_bits(F::fused_elementwise(std::vector<Tensor>{x, y}, "relu6(x0 * x1 - x0 / 3)"),
                  F::relu6(x * y - x / 3.0f)));
  CHECK(same_bits(F::fused_elementwise(std::vector<Tensor>{x, c}, "relu(x0 * x1 + 2)"), F::relu(x * c + 2.0f)));
  CHECK(same_bits(F::fused_elementwise(std::vector<Tensor>{c, x, row}, "maximum(x0, x1) - sigmoid(x2)"),
                  F::maximum(c, x) - F::sigmoid(row)));
  CHECK(same_bits(F::fused_elementwise(std::vector<Tensor>{scalar, x}, "tanh(exp(-x1) * x0)"),
                  F::tanh(F::exp(F::neg(x)) * scalar)));
  CHECK(same_bits(F::fused_elementwise(std::vector<Tensor>{x, y}, "minimum(x0, x1) / (x1 - 4)"),
                  F::minimum(x, y) / (y - 4.0f)));
  // A broadcast of two small operands into a bigger output, and a one-element output.
  const Tensor col = tmod::randn({4, 1}, 6), line = tmod::randn({1, 9}, 7);
  CHECK(same_bits(F::fused_elementwise(std::vector<Tensor>{col, line}, "x0 + x1"), col + line));
  CHECK(same_bits(F::fused_elementwise(std::vector<Tensor>{scalar}, "x0 * 2"), scalar * 2.0f));
  const Tensor empty = F::fused_elementwise(std::vector<Tensor>{tmod::randn({0, 3})}, "relu(x0)");
  CHECK(empty.shape() == Shape{0, 3});
}

TEST_CASE("functional: elemwise.fused has the unfused bits at every length around its blocks and tail") {
  // The program runs a block of vectors at a time, the last n % simd_width elements padded: lengths
  // on both sides of one vector, one block and several blocks, an input used twice, a repeated one.
  const auto w = static_cast<std::int64_t>(tmod::kernels::simd_width);
  const auto b = static_cast<std::int64_t>(F::fused_program::block) * w;
  for (const std::int64_t n : {std::int64_t{1}, w - 1, w, w + 1, b - 1, b, b + 1, 3 * b + w + 2}) {
    CAPTURE(n);
    const Tensor x = tmod::randn({n}, 11), y = tmod::randn({n}, 12), s = tmod::randn({1}, 13);
    CHECK(same_bits(F::fused_elementwise(std::vector<Tensor>{x, y, s}, "maximum(x0 * x1, -x0) - sigmoid(x2) / 3"),
                    F::maximum(x * y, -x) - F::sigmoid(s) / 3.0f));
  }
}

TEST_CASE("functional: elemwise.fused is bit-identical at 1 to 4 threads") {
  const Tensor x = tmod::randn({3, 8, 33}, 8), c = tmod::randn({8, 1}, 9);
  thread_counts::check_bit_identical("elemwise.fused", [&] {
    const Tensor y = F::fused_elementwise(std::vector<Tensor>{x, c}, "relu(x0 * x1 + 1)");
    return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
  });
}

TEST_CASE("functional: elemwise.fused errors name the op") {
  const Tensor x = tmod::randn({2, 3}), y = tmod::randn({4, 3});
  CHECK_THROWS_AS((void)F::fused_elementwise(std::vector<Tensor>{x, y}, "x0 + x1"), tmod::shape_error);
  CHECK_THROWS_AS((void)F::fused_elementwise(std::vector<Tensor>{x}, "x0 + x1"), tmod::value_error);
  CHECK_THROWS_AS((void)F::fused_elementwise(std::vector<Tensor>{x, y}, "x0"), tmod::value_error);
  CHECK_THROWS_AS((void)F::fused_elementwise(std::vector<Tensor>{x}, "relu("), tmod::value_error);
  try {
    (void)F::fused_elementwise(std::vector<Tensor>{x}, "x0 + x1");
  } catch (const tmod::value_error& e) {
    CHECK(std::string(e.what()).find("elemwise.fused: the program 'x0 + x1' reads 2 inputs, got 1") == 0);
  }
}

TEST_CASE("registry: elemwise.fused is elementwise, prints its program, takes a list and a string") {
  const F::op_entry& e = F::entry_of(F::fused_elementwise);
  CHECK(e.elementwise);
  CHECK(e.positional_param_count() == 1);
  const F::erased_params p = e.make_params(std::vector<tmod::Value>{tmod::Value("relu(x0*0.5+1)")});
  REQUIRE(e.callee_text);
  CHECK(e.callee_text(p.get()) == "elemwise.fused[relu(x0 * 0.5 + 1.0)]");
  const Tensor x = tmod::randn({4, 5}, 10);
  const std::vector<Tensor> list{x};
  using k = F::erased_operand::kind;
  const std::vector<F::erased_operand> ops{{k::list, nullptr, 0.0, list}};
  CHECK(same_bits(e.call(p.get(), ops), F::relu(x * 0.5f + 1.0f)));
  CHECK_FALSE(F::entry_of(F::conv2d).callee_text);
}

}  // namespace tmod_test_functional_fused_elementwise
