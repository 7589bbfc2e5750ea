// Shapes as values: F::shape_of / F::size / F::reshape_to in eager mode (against the shapes they
// read), recorded by trace_module as MegEngine records them (GetVarShape, __getitem__, stack), with
// the symbolic value that makes a reshape by `x.size(0)` follow a dynamic batch, run by the
// interpreter and after save -> load at other batch sizes (against eager mode), and the errors.
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>
#include <same_bytes.hpp>
#include <shape_value_models.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

namespace tmod_test_serialize_shape_values {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
using tmod_test::same_bytes;

/// torch's `fc(x.view(x.size(0), -1))`, written once for tensors and symbols.
struct ViewNet : tmod::Module {
  M::Linear fc{24, 5};
  TM_MODULE(ViewNet, fc)
  auto forward(const auto& x) const { return fc(F::reshape_to(x, F::tensor_from_list(F::size(x, 0), -1))); }
};

/// Reshapes (A, B, C) to (C, 1, B, A): extents picked by index and stacked with a number.
struct Permuted : tmod::Module {
  TM_MODULE(Permuted)
  auto forward(const auto& x) const {
    const auto s = F::shape_of(x);
    return F::reshape_to(x, F::tensor_from_list(F::getitem(s, 2), 1, F::getitem(s, 1), F::getitem(s, 0)));
  }
};

/// A shape computed by the caller and used by a sub-module: the value crosses the call.
struct Rows : tmod::Module {
  TM_MODULE(Rows)
  auto forward(const auto& x, const auto& shape) const { return F::relu(F::reshape_to(x, shape)); }
};
struct Caller : tmod::Module {
  Rows rows;
  TM_MODULE(Caller, rows)
  auto forward(const auto& x) const { return rows(x, F::tensor_from_list(-1, F::size(x, -1))); }
};

/// Reshapes with a number read from a Sym: fine for a static axis, refused for a symbolic one.
struct SizeAsNumber : tmod::Module {
  TM_MODULE(SizeAsNumber)
  auto forward(const auto& x) const { return F::reshape(x, {x.size(0), -1}); }
};

/// Reshapes to a shape read from data: known only at run time.
struct DataShape : tmod::Module {
  TM_MODULE(DataShape)
  auto forward(const auto& x, const auto& s) const { return F::reshape_to(x, F::astype(s, tmod::int32)); }
};

using shape_value_models::DoubledRows;

/// x.view(2 * x.size(0), x.numel() // (2 * x.size(0))).
struct Counted : tmod::Module {
  TM_MODULE(Counted)
  auto forward(const auto& x) const {
    const auto rows = 2 * F::size(x, 0);
    const auto cols = F::floor_div(F::numel(x), rows);
    return F::reshape_to(x, F::tensor_from_list(rows, cols));
  }
};

/// torch's `token.expand(x.size(0), -1, -1)` of a (1, 1, 4) parameter, concatenated before x.
struct TokenNet : tmod::Module {
  tmod::Parameter token{tmod::randn({1, 1, 4}, 3)};
  TM_MODULE(TokenNet, token)
  auto forward(const auto& x) const {
    return F::concat(std::tuple{F::expand_to(token, F::tensor_from_list(F::size(x, 0), -1, -1)), x}, 1);
  }
};

/// x.size(0) / 2: true division of an int32 extent.
struct HalvedBatch : tmod::Module {
  TM_MODULE(HalvedBatch)
  auto forward(const auto& x) const { return F::size(x, 0) / 2; }
};
/// F::maximum of two extents: an op with no int32 form.
struct LargerExtent : tmod::Module {
  TM_MODULE(LargerExtent)
  auto forward(const auto& x) const { return F::maximum(F::size(x, 0), F::size(x, 1)); }
};

std::vector<std::int32_t> ints(const tmod::Tensor& t) {
  REQUIRE(t.dtype() == tmod::DType::int32);
  return {t.data<std::int32_t>(), t.data<std::int32_t>() + t.numel()};
}

}  // namespace

TEST_CASE("shape values: shape_of, size and reshape_to in eager mode read and apply the tensor's shape") {
  const tmod::Tensor x = tmod::randn({2, 3, 4});
  CHECK(ints(F::shape_of(x)) == std::vector<std::int32_t>{2, 3, 4});
  CHECK(F::size(x, -1).shape() == tmod::Shape{});
  CHECK(ints(F::size(x, -1)) == std::vector<std::int32_t>{4});
  const tmod::Tensor list = F::tensor_from_list(F::size(x, 0), -1);
  CHECK(ints(list) == std::vector<std::int32_t>{2, -1});
  const tmod::Tensor y = F::reshape_to(x, list);
  CHECK(y.shape() == tmod::Shape{2, 12});
  CHECK(same_bytes(y, F::reshape(x, {2, 12})));
  CHECK(Permuted{}(x).shape() == tmod::Shape{4, 1, 3, 2});
  // a list of int32 holds only integers; the shape operand is 1-D int32
  CHECK_THROWS_AS(F::tensor_from_list(F::size(x, 0), 0.5), tmod::value_error);
  CHECK_THROWS_AS(F::reshape_to(x, tmod::tensor({2.f, 12.f})), tmod::dtype_error);
  CHECK_THROWS_AS(F::reshape_to(x, F::tensor_from_list(F::size(x, 0), 5)), tmod::shape_error);
}

TEST_CASE("shape values: a reshape by x.size(0) traced with a dynamic batch records GetVarShape and runs at any batch") {
  ViewNet net;
  const tmod::TracedModule t = tmod::trace_module(net, tmod::randn({2, 2, 3, 4}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  CHECK(tmod::graph::to_string(t.graph()) ==
        "ViewNet.Graph (self, x: (N, 2, 3, 4)) {\n"
        "\t%2:\tgetvarshape_out = GetVarShape(x, )\n"
        "\t%3:\tgetitem_out = getvarshape_out.__getitem__(0, )\n"
        "\t%4:\tconst_tensor = Constant(Tensor) -> (Tensor)\n"
        "\t%5:\tstack_out = tensor.stack([getitem_out, const_tensor], 0, )\n"
        "\t%6:\treshape_out = tensor.reshape_to(x, stack_out, )\n"
        "\t%7:\tfc = getattr(self, \"fc\") -> (Linear)\n"
        "\t%8:\tfc_out = fc(reshape_out, )\n"
        "\treturn fc_out\n"
        "}");
  const auto* reshaped = static_cast<const tmod::graph::TensorNode*>(t.graph().get_node_by_name("reshape_out").as_unique());
  CHECK(reshaped->shape_text() == "(N, 24)");
  CHECK(static_cast<const tmod::graph::TensorNode*>(t.graph().outputs()[0])->shape_text() == "(N, 5)");
  for (const std::int64_t n : {1, 3, 7}) {
    const tmod::Tensor x = tmod::randn({n, 2, 3, 4});
    CHECK(same_bytes(t(x).tensor(), net(x)));
  }
  const auto path = std::filesystem::temp_directory_path() / "tracemod_shape_values.tm";
  tmod::save(t, path);
  const tmod::TracedModule back = tmod::load(path);
  std::filesystem::remove(path);
  const tmod::Tensor x = tmod::randn({5, 2, 3, 4});
  CHECK(same_bytes(back(x).tensor(), net(x)));
  // the static axes stay checked: 2*3*5 elements do not make rows of 24
  CHECK_THROWS_AS(t(tmod::randn({2, 2, 3, 5})), tmod::shape_error);
}

TEST_CASE("shape values: a value passed to a sub-module keeps its expressions, through save -> load") {
  const tmod::TracedModule t =
      tmod::trace_module(Caller{}, tmod::randn({2, 3, 4}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "L"}}});
  CHECK(static_cast<const tmod::graph::TensorNode*>(t.graph().outputs()[0])->shape_text() == "(N*3, L)");
  const auto path = std::filesystem::temp_directory_path() / "tracemod_shape_values_call.tm";
  tmod::save(t, path);
  const tmod::TracedModule back = tmod::load(path);
  std::filesystem::remove(path);
  const tmod::Tensor x = tmod::randn({4, 3, 6});
  CHECK(same_bytes(back(x).tensor(), Caller{}(x)));
  CHECK(static_cast<const tmod::graph::TensorNode*>(back.graph().outputs()[0])->shape_text() == "(N*3, L)");
}

TEST_CASE("shape values: gathered and stacked extents keep their expressions") {
  const tmod::TracedModule t =
      tmod::trace_module(Permuted{}, tmod::randn({2, 3, 4}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "L"}}});
  CHECK(static_cast<const tmod::graph::TensorNode*>(t.graph().outputs()[0])->shape_text() == "(L, 1, 3, N)");
  const tmod::Tensor x = tmod::randn({5, 3, 7});
  CHECK(same_bytes(t(x).tensor(), Permuted{}(x)));
}

TEST_CASE("shape values: int32 arithmetic computes exactly, with broadcasting, against integer reference values") {
  const tmod::Tensor x = tmod::randn({2, 3, 4});
  CHECK(ints(F::size(x, 0) * 2) == std::vector<std::int32_t>{4});
  CHECK(ints(2 * F::size(x, 0)) == std::vector<std::int32_t>{4});
  CHECK(ints(F::size(x, 0) + 1) == std::vector<std::int32_t>{3});
  CHECK(ints(1 - F::size(x, 1)) == std::vector<std::int32_t>{-2});
  CHECK(ints(F::shape_of(x) * F::size(x, 0)) == std::vector<std::int32_t>{4, 6, 8});
  CHECK(ints(F::shape_of(x) - F::shape_of(x)) == std::vector<std::int32_t>{0, 0, 0});
  CHECK(ints(F::add(F::size(x, 2), F::size(x, 1))) == std::vector<std::int32_t>{7});
  // floor division rounds toward -inf, as torch's // and Python's
  CHECK(ints(F::floor_div(-7, F::size(x, 1))) == std::vector<std::int32_t>{-3});
  CHECK(ints(F::floor_div(F::size(x, 2), -3)) == std::vector<std::int32_t>{-2});
  CHECK(ints(F::floor_div(F::shape_of(x), 2)) == std::vector<std::int32_t>{1, 1, 2});
  CHECK(F::numel(x).shape() == tmod::Shape{});
  CHECK(ints(F::numel(x)) == std::vector<std::int32_t>{24});
  // float32 floor division, broadcast (5, 1) against (3,): floor(a / b) for each pair
  const std::vector<float> a{7.f, -7.f, 7.5f, -0.5f, 6.f}, b{2.f, -2.f, 3.f};
  const tmod::Tensor q = F::floor_div(tmod::tensor({{7.f}, {-7.f}, {7.5f}, {-0.5f}, {6.f}}), tmod::tensor({2.f, -2.f, 3.f}));
  REQUIRE(q.shape() == tmod::Shape{5, 3});
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < b.size(); ++j) CHECK(q.data<float>()[i * 3 + j] == std::floor(a[i] / b[j]));
  // int32 arithmetic takes int32 tensors and integers; true division and results past int32 are refused
  CHECK_THROWS_AS(F::size(x, 0) * 2.5, tmod::dtype_error);
  CHECK_THROWS_AS(F::size(x, 0) + tmod::tensor({1.f}), tmod::dtype_error);
  CHECK_THROWS_AS(F::size(x, 0) / 2, tmod::dtype_error);
  CHECK_THROWS_WITH_AS(F::floor_div(F::size(x, 0), 0), doctest::Contains("by zero"), tmod::value_error);
  CHECK_THROWS_WITH_AS(F::size(x, 0) * 2000000000, doctest::Contains("does not fit in int32"), tmod::value_error);
}

TEST_CASE("shape values: arithmetic on extents traced with a dynamic batch keeps expressions and runs at any batch") {
  DoubledRows net;
  const tmod::TracedModule t = tmod::trace_module(net, tmod::randn({2, 4, 6}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  CHECK(tmod::graph::to_string(t.graph()) ==
        "DoubledRows.Graph (self, x: (N, 4, 6)) {\n"
        "\t%2:\tgetvarshape_out = GetVarShape(x, )\n"
        "\t%3:\tgetitem_out = getvarshape_out.__getitem__(0, )\n"
        "\t%4:\tmul_out = getitem_out.__mul__(2, )\n"
        "\t%5:\tgetvarshape_out_1 = GetVarShape(x, )\n"
        "\t%6:\tgetitem_out_1 = getvarshape_out_1.__getitem__(1, )\n"
        "\t%7:\tfloor_div_out = elemwise.floor_div(getitem_out_1, 2, )\n"
        "\t%8:\tconst_tensor = Constant(Tensor) -> (Tensor)\n"
        "\t%9:\tstack_out = tensor.stack([mul_out, floor_div_out, const_tensor], 0, )\n"
        "\t%10:\treshape_out = tensor.reshape_to(x, stack_out, )\n"
        "\treturn reshape_out\n"
        "}");
  const auto node = [&](const char* name) {
    return static_cast<const tmod::graph::TensorNode*>(t.graph().get_node_by_name(name).as_unique());
  };
  REQUIRE(node("mul_out")->value() != nullptr);
  CHECK(node("mul_out")->dtype() == tmod::DType::int32);
  CHECK(node("mul_out")->value()->dims == tmod::Dims{tmod::DimExpr::symbol("N") * 2});
  CHECK(node("stack_out")->value()->example == std::vector<std::int64_t>{4, 2, -1});
  CHECK(node("reshape_out")->shape_text() == "(N*2, 2, 6)");
  for (const std::int64_t n : {1, 4}) {
    const tmod::Tensor x = tmod::randn({n, 4, 6});
    const tmod::Tensor y = t(x).tensor();
    CHECK(y.shape() == tmod::Shape{2 * n, 2, 6});
    CHECK(same_bytes(y, net(x)));
  }
  const auto path = std::filesystem::temp_directory_path() / "tracemod_shape_values_arith.tm";
  tmod::save(t, path);
  const tmod::TracedModule back = tmod::load(path);
  std::filesystem::remove(path);
  CHECK(static_cast<const tmod::graph::TensorNode*>(back.graph().outputs()[0])->shape_text() == "(N*2, 2, 6)");
  const tmod::Tensor x = tmod::randn({3, 4, 6});
  CHECK(same_bytes(back(x).tensor(), net(x)));
}

TEST_CASE("shape values: a reflected product and an element count carry their expressions into the reshape") {
  const tmod::TracedModule t = tmod::trace_module(Counted{}, tmod::randn({2, 4, 6}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  const auto node = [&](const char* name) {
    return static_cast<const tmod::graph::TensorNode*>(t.graph().get_node_by_name(name).as_unique());
  };
  CHECK(node("rmul_out")->value()->dims[0].to_string() == "N*2");
  CHECK(node("numel_out")->value()->dims[0].to_string() == "N*24");
  CHECK(node("numel_out")->value()->example == std::vector<std::int64_t>{48});
  CHECK(node("floor_div_out")->value()->dims[0].evaluate({{"N", 3}}) == 12);
  for (const std::int64_t n : {1, 4}) {
    const tmod::Tensor x = tmod::randn({n, 4, 6});
    CHECK(t(x).tensor().shape() == tmod::Shape{2 * n, 12});
    CHECK(same_bytes(t(x).tensor(), Counted{}(x)));
  }
  // the arithmetic passes keep the int32 exprs runnable and their values known
  const tmod::TracedModule o = tmod::optimize(t, {"NormElemWise", "FuseAddMul", "FoldConstant", "FuseElemwise"});
  const tmod::Tensor x = tmod::randn({3, 4, 6});
  CHECK(same_bytes(o(x).tensor(), Counted{}(x)));
}

TEST_CASE("shape values: expand_to repeats along the stretched axes, -1 keeps the input's extent") {
  const tmod::Tensor a = tmod::randn({3, 1}, 5);
  const tmod::Tensor y = F::expand_to(a, tmod::tensor({2, -1, 4}));
  REQUIRE(y.shape() == tmod::Shape{2, 3, 4});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 4; ++k) CHECK(y.at<float>({i, j, k}) == a.at<float>({j, 0}));
  CHECK(same_bytes(F::expand_to(a, tmod::tensor({3, 2})), F::broadcast_to(a, {3, 2})));
  CHECK_THROWS_AS(F::expand_to(a, tmod::tensor({-1, -1, 2})), tmod::shape_error);  // -1 on a new axis
  CHECK_THROWS_AS(F::expand_to(a, tmod::tensor({2, 2})), tmod::shape_error);       // 3 is not 2
  CHECK_THROWS_AS(F::expand_to(a, tmod::tensor({2})), tmod::shape_error);          // rank below the input's
  CHECK_THROWS_AS(F::expand_to(a, tmod::tensor({3.f, 2.f})), tmod::dtype_error);
}

TEST_CASE("shape values: a parameter expanded by x.size(0) is an attribute and follows a dynamic batch") {
  TokenNet net;
  const tmod::TracedModule t = tmod::trace_module(net, tmod::randn({2, 5, 4}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}});
  const std::string text = tmod::graph::to_string(t.graph());
  CHECK(text.find("getattr(self, \"token\")") != std::string::npos);
  CHECK(text.find("tensor.expand_to(token, ") != std::string::npos);
  CHECK(static_cast<const tmod::graph::TensorNode*>(t.graph().outputs()[0])->shape_text() == "(N, 6, 4)");
  const auto path = std::filesystem::temp_directory_path() / "tracemod_shape_values_expand.tm";
  tmod::save(t, path);
  const tmod::TracedModule back = tmod::load(path);
  std::filesystem::remove(path);
  for (const std::int64_t n : {1, 3}) {
    const tmod::Tensor x = tmod::randn({n, 5, 4});
    CHECK(same_bytes(t(x).tensor(), net(x)));
    CHECK(same_bytes(back(x).tensor(), net(x)));
  }
  CHECK(static_cast<const tmod::graph::TensorNode*>(back.graph().outputs()[0])->shape_text() == "(N, 6, 4)");
}

TEST_CASE("shape values: true division of int32 is refused eagerly, while recording and while tracing a typed graph, alike") {
  const tmod::Tensor x = tmod::randn({4, 6});
  std::string eager;
  try {
    (void)(F::size(x, 0) / 2);
  } catch (const tmod::dtype_error& e) {
    eager = e.what();
  }
  REQUIRE(eager.find("__truediv__") != std::string::npos);
  REQUIRE(eager.find("F::floor_div") != std::string::npos);
  // recorded on a Sym (static or dynamic batch): refused when the expr is recorded, not when run
  CHECK_THROWS_WITH_AS(tmod::trace_module(HalvedBatch{}, x), doctest::Contains(eager.c_str()), tmod::dtype_error);
  CHECK_THROWS_WITH_AS(tmod::trace_module(HalvedBatch{}, x, tmod::TraceOptions{.dynamic_dims = {{0, "N"}}}),
                       doctest::Contains(eager.c_str()), tmod::dtype_error);
  // the typed tracer states the same dtype rule as it records
  CHECK_THROWS_WITH_AS(tmod::symbolic_trace(HalvedBatch{}, tmod::spec({4, 6})), doctest::Contains(eager.c_str()), tmod::dtype_error);
  // the other ops without an int32 form, too
  CHECK_THROWS_WITH_AS(LargerExtent{}(x), doctest::Contains("elemwise.maximum: an int32 operand"), tmod::dtype_error);
  CHECK_THROWS_WITH_AS(tmod::trace_module(LargerExtent{}, x), doctest::Contains("elemwise.maximum: an int32 operand"),
                       tmod::dtype_error);
  // floor division is the integer quotient, in every mode
  CHECK(ints(F::floor_div(F::size(x, 0), 2)) == std::vector<std::int32_t>{2});
}

TEST_CASE("shape values: errors name the symbolic axis or the value not known while recording") {
  // a symbolic axis has no number to give: Sym::size says to record it
  CHECK_THROWS_WITH_AS(tmod::trace_module(SizeAsNumber{}, tmod::randn({2, 3}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}}}),
                       doctest::Contains("F::size(x, 0) records it"), tmod::shape_error);
  // ... a static one does (the reshape is static)
  CHECK(tmod::trace_module(SizeAsNumber{}, tmod::randn({2, 3}))(tmod::randn({2, 3})).tensor().shape() == tmod::Shape{2, 3});
  // a shape read from data has no value while recording
  CHECK_THROWS_WITH_AS(tmod::trace_module(DataShape{}, tmod::randn({2, 3}), tmod::tensor({3.f, 2.f})),
                       doctest::Contains("must be an int32 value computed from shapes"), tmod::shape_error);
}

}  // namespace tmod_test_serialize_shape_values
