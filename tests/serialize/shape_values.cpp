// Shapes as values: F::shape_of / F::size / F::reshape_to in eager mode (against the shapes they
// read), recorded by trace_module as MegEngine records them (GetVarShape, __getitem__, stack), with
// the symbolic value that makes a reshape by `x.size(0)` follow a dynamic batch, run by the
// interpreter and after save -> load at other batch sizes (against eager mode), and the errors.
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>
#include <same_bytes.hpp>

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

/// torch's `token.expand(x.size(0), -1, -1)` of a (1, 1, 4) parameter, concatenated before x.
struct TokenNet : tmod::Module {
  tmod::Parameter token{tmod::randn({1, 1, 4}, 3)};
  TM_MODULE(TokenNet, token)
  auto forward(const auto& x) const {
    return F::concat(std::tuple{F::expand_to(token, F::tensor_from_list(F::size(x, 0), -1, -1)), x}, 1);
  }
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
