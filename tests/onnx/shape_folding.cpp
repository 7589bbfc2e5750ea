// ONNX import of the shape computations exporters write (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape, ConstantOfShape / Equal / Where / Expand, Range, Mod, ScatterND): import computes them
// at import time, and the imported graph holds only the tensor ops. Each model is built by hand
// with ONNX's protobuf classes as torch.onnx writes it; results are checked against loops.
#include <tracemod/core/factories.hpp>
#include <tracemod/onnx.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace tmod_test_onnx_shape_folding {

namespace {

namespace tmod = tracemod;
namespace proto = tracemod::onnx::proto;
using tmod::Tensor;

struct model_builder {
  proto::ModelProto m;
  proto::GraphProto& g = *m.mutable_graph();

  explicit model_builder(std::int64_t opset = 13) {
    m.set_ir_version(proto::IR_VERSION);
    m.add_opset_import()->set_version(opset);
    g.set_name("folding");
  }
  void value(proto::ValueInfoProto& v, const std::string& name, int type, const std::vector<std::int64_t>& shape) {
    v.set_name(name);
    proto::TypeProto_Tensor& t = *v.mutable_type()->mutable_tensor_type();
    t.set_elem_type(type);
    for (std::int64_t d : shape) {
      if (d < 0) t.mutable_shape()->add_dim()->set_dim_param("batch");
      else t.mutable_shape()->add_dim()->set_dim_value(d);
    }
  }
  void input(const std::string& name, const std::vector<std::int64_t>& shape) {
    value(*g.add_input(), name, proto::TensorProto::FLOAT, shape);
  }
  void output(const std::string& name, const std::vector<std::int64_t>& shape) {
    value(*g.add_output(), name, proto::TensorProto::FLOAT, shape);
  }
  proto::NodeProto& node(const std::string& op, const std::vector<std::string>& in, const std::string& out) {
    proto::NodeProto& n = *g.add_node();
    n.set_name(out + "_node");
    n.set_op_type(op);
    for (const std::string& i : in) n.add_input(i);
    n.add_output(out);
    return n;
  }
  /// A Constant node of int64 values (rank 0 when `scalar`).
  std::string ints(const std::string& name, const std::vector<std::int64_t>& v, bool scalar = false) {
    proto::NodeProto& n = node("Constant", {}, name);
    proto::AttributeProto& a = *n.add_attribute();
    a.set_name("value");
    a.set_type(proto::AttributeProto::TENSOR);
    proto::TensorProto& t = *a.mutable_t();
    t.set_data_type(proto::TensorProto::INT64);
    if (!scalar) t.add_dims(static_cast<std::int64_t>(v.size()));
    for (std::int64_t x : v) t.add_int64_data(x);
    return name;
  }
  void attr(proto::NodeProto& n, const std::string& name, std::int64_t v) {
    proto::AttributeProto& a = *n.add_attribute();
    a.set_name(name);
    a.set_type(proto::AttributeProto::INT);
    a.set_i(v);
  }
  void attr(proto::NodeProto& n, const std::string& name, const std::vector<std::int64_t>& v) {
    proto::AttributeProto& a = *n.add_attribute();
    a.set_name(name);
    a.set_type(proto::AttributeProto::INTS);
    for (std::int64_t x : v) a.add_ints(x);
  }
};

std::vector<float> values(const Tensor& t) {
  const auto v = t.values<float>();
  return {v.begin(), v.end()};
}

/// "x.view(n, 2, c / 2, h, w).transpose(1, 2).view(n, -1, h, w)", as torch.onnx writes ShuffleNet's
/// channel shuffle: the extents come from Shape and Gather.
model_builder channel_shuffle() {
  model_builder b;
  b.input("x", {1, 6, 2, 3});
  b.node("Shape", {"x"}, "shape");
  std::vector<std::string> parts;
  for (std::int64_t axis : {0, 2, 3}) {
    const std::string i = std::to_string(axis);
    b.node("Gather", {"shape", b.ints("axis" + i, {axis}, true)}, "extent" + i);
    b.node("Unsqueeze", {"extent" + i, b.ints("zero" + i, {0})}, "dim" + i);
  }
  b.attr(b.node("Concat", {"dim0", b.ints("groups", {2, 3}), "dim2", "dim3"}, "split_shape"), "axis", std::int64_t{0});
  b.node("Reshape", {"x", "split_shape"}, "split");
  b.attr(b.node("Transpose", {"split"}, "swapped"), "perm", std::vector<std::int64_t>{0, 2, 1, 3, 4});
  proto::NodeProto& back = b.node("Concat", {"dim0", b.ints("rest", {-1}), "dim2", "dim3"}, "back_shape");
  b.attr(back, "axis", std::int64_t{0});
  b.node("Reshape", {"swapped", "back_shape"}, "y");
  b.output("y", {1, 6, 2, 3});
  return b;
}

}  // namespace

TEST_CASE("onnx import: a channel shuffle written with Shape and Gather imports as reshape, transpose, reshape") {
  const tmod::TracedModule m = tmod::onnx::import_model(channel_shuffle().m);
  std::ostringstream text;  // no Shape, Gather, Unsqueeze or Concat is left
  text << m.graph();
  CHECK(text.str() ==
        "folding.Graph (self, x) {\n"
        "\t%2:\tsplit = tensor.reshape(x, (1, 2, 3, 2, 3), )\n"
        "\t%3:\tswapped = tensor.transpose(split, (0, 2, 1, 3, 4), )\n"
        "\t%4:\ty = tensor.reshape(swapped, (1, -1, 2, 3), )\n"
        "\treturn y\n"
        "}");
  const Tensor x = tmod::uniform({1, 6, 2, 3}, -1.f, 1.f, 5);
  const std::vector<float> in = values(x), out = values(m(x));
  std::vector<float> want(in.size());
  for (int c = 0; c < 6; ++c)  // output channel c = k * 2 + g reads input channel g * 3 + k
    for (int p = 0; p < 6; ++p) want[static_cast<std::size_t>(c * 6 + p)] = in[static_cast<std::size_t>((c % 2 * 3 + c / 2) * 6 + p)];
  CHECK(out == want);
}

TEST_CASE("onnx import: expand(n, -1, -1) of a token, written with ConstantOfShape, Equal and Where, folds") {
  model_builder b;
  b.input("x", {1, 2, 4});
  proto::TensorProto& token = *b.g.add_initializer();
  token.set_name("token");
  token.set_data_type(proto::TensorProto::FLOAT);
  for (std::int64_t d : {1, 1, 4}) token.add_dims(d);
  for (float v : {1.f, 2.f, 3.f, 4.f}) token.add_float_data(v);
  b.node("Shape", {"x"}, "shape");
  b.node("Gather", {"shape", b.ints("zero", {0}, true)}, "n");
  b.node("Unsqueeze", {"n", b.ints("axes", {0})}, "n1");
  b.attr(b.node("Concat", {"n1", b.ints("minus", {-1, -1})}, "sizes"), "axis", std::int64_t{0});
  b.node("Shape", {"sizes"}, "sizes_shape");
  proto::NodeProto& ones = b.node("ConstantOfShape", {"sizes_shape"}, "ones");
  proto::AttributeProto& one = *ones.add_attribute();
  one.set_name("value");
  one.set_type(proto::AttributeProto::TENSOR);
  one.mutable_t()->set_data_type(proto::TensorProto::INT64);
  one.mutable_t()->add_dims(1);
  one.mutable_t()->add_int64_data(1);
  b.node("Mul", {"ones", b.ints("neg", {-1}, true)}, "minus_ones");
  b.node("Equal", {"sizes", "minus_ones"}, "free");
  b.node("Where", {"free", "ones", "sizes"}, "target");
  b.node("Expand", {"token", "target"}, "tokens");
  b.attr(b.node("Concat", {"tokens", "x"}, "y"), "axis", std::int64_t{1});
  b.output("y", {1, 3, 4});
  const tmod::TracedModule m = tmod::onnx::import_model(b.m);
  const Tensor x = tmod::uniform({1, 2, 4}, -1.f, 1.f, 6);
  const std::vector<float> in = values(x), out = values(m(x));
  REQUIRE(out.size() == 12);
  CHECK(std::vector<float>(out.begin(), out.begin() + 4) == std::vector<float>{1.f, 2.f, 3.f, 4.f});
  CHECK(std::vector<float>(out.begin() + 4, out.end()) == in);
}

TEST_CASE("onnx import: Range, Mod, Cast, ConstantOfShape and ScatterND of constants fold to the values ONNX defines") {
  model_builder b;
  b.input("x", {2, 3});
  b.node("Range", {b.ints("start", {-2}, true), b.ints("limit", {4}, true), b.ints("delta", {1}, true)}, "r");  // -2 .. 3
  b.node("Mod", {"r", b.ints("four", {4}, true)}, "m");  // the divisor's sign: 2 3 0 1 2 3
  b.attr(b.node("Cast", {"m"}, "mf"), "to", std::int64_t{proto::TensorProto::FLOAT});
  b.node("Reshape", {"mf", b.ints("shape", {2, 3})}, "grid");
  proto::NodeProto& zeros = b.node("ConstantOfShape", {b.ints("dims", {2, 3})}, "zeros");  // float 0 by default
  (void)zeros;
  proto::TensorProto& upd = *b.g.add_initializer();
  upd.set_name("upd");
  upd.set_data_type(proto::TensorProto::FLOAT);
  upd.add_dims(1);
  upd.add_float_data(10.f);
  proto::NodeProto& idx = b.node("Constant", {}, "idx");
  proto::AttributeProto& a = *idx.add_attribute();
  a.set_name("value");
  a.set_type(proto::AttributeProto::TENSOR);
  a.mutable_t()->set_data_type(proto::TensorProto::INT64);
  a.mutable_t()->add_dims(1);
  a.mutable_t()->add_dims(2);
  a.mutable_t()->add_int64_data(1);
  a.mutable_t()->add_int64_data(-1);
  b.node("ScatterND", {"zeros", "idx", "upd"}, "spike");
  b.node("Add", {"grid", "spike"}, "bias");
  b.node("Add", {"x", "bias"}, "y");
  b.output("y", {2, 3});
  const tmod::TracedModule m = tmod::onnx::import_model(b.m);
  const Tensor x = tmod::uniform({2, 3}, -1.f, 1.f, 7);
  const std::vector<float> in = values(x), out = values(m(x));
  const std::vector<float> bias{2, 3, 0, 1, 2, 3 + 10};
  for (std::size_t i = 0; i < 6; ++i) CHECK(out[i] == in[i] + bias[i]);
}

TEST_CASE("onnx import: Gather with constant indices and Split take slices of a tensor") {
  model_builder b;
  b.input("x", {2, 5, 3});
  b.attr(b.node("Gather", {"x", b.ints("second", {1}, true)}, "row"), "axis", std::int64_t{1});       // x[:, 1]: (2, 3)
  b.attr(b.node("Gather", {"x", b.ints("back", {4, 2, 0})}, "every"), "axis", std::int64_t{1});     // x[:, 4::-2]: (2, 3, 3)
  const std::string sizes = b.ints("sizes", {1, 2});
  proto::NodeProto& split = *b.g.add_node();
  split.set_op_type("Split");
  split.add_input("every");
  split.add_input(sizes);
  split.add_output("first");
  split.add_output("rest");
  b.attr(split, "axis", std::int64_t{1});
  b.node("Unsqueeze", {"row", b.ints("one", {1})}, "row3");
  b.attr(b.node("Concat", {"rest", "first", "row3"}, "y"), "axis", std::int64_t{1});  // rows 2, 0, 4, 1 of x
  b.output("y", {2, 4, 3});
  const tmod::TracedModule m = tmod::onnx::import_model(b.m);
  const Tensor x = tmod::uniform({2, 5, 3}, -1.f, 1.f, 8);
  const std::vector<float> in = values(x), out = values(m(x));
  REQUIRE(out.size() == 24);
  const int rows[] = {2, 0, 4, 1};
  for (int n = 0; n < 2; ++n)
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 3; ++c)
        CHECK(out[static_cast<std::size_t>((n * 4 + r) * 3 + c)] == in[static_cast<std::size_t>((n * 5 + rows[r]) * 3 + c)]);
}

TEST_CASE("onnx import: shape computations that cannot be folded are refused, naming the node and the values") {
  const auto refusal = [](const proto::ModelProto& m, const tmod::onnx::ImportOptions& o = {}) -> std::string {
    try {
      (void)tmod::onnx::import_model(m, o);
    } catch (const tmod::value_error& e) {
      return e.what();
    }
    return "imported";
  };
  {  // an index out of range
    model_builder b;
    b.input("x", {1, 6, 2, 3});
    b.node("Shape", {"x"}, "shape");
    b.node("Gather", {"shape", b.ints("seven", {7}, true)}, "bad");
    b.node("Reshape", {"x", "bad"}, "y");
    b.output("y", {1, 6, 2, 3});
    CHECK(refusal(b.m).find("node 'bad_node' (Gather): index 7 is out of range for axis 0 of (4,)") != std::string::npos);
  }
  {  // a value too large to compute at import time
    model_builder b;
    b.input("x", {1});
    b.node("ConstantOfShape", {b.ints("huge", {1 << 20, 1 << 20})}, "big");
    b.node("Add", {"x", "big"}, "y");
    b.output("y", {1});
    CHECK(refusal(b.m).find("(ConstantOfShape): output (1048576, 1048576) holds more than 16777216 elements") != std::string::npos);
  }
  {  // integer arithmetic that overflows int64
    model_builder b;
    b.input("x", {1});
    b.node("Add", {b.ints("big", {INT64_MAX}), b.ints("one", {1})}, "sum");
    b.node("Reshape", {"x", "sum"}, "y");
    b.output("y", {1});
    CHECK(refusal(b.m).find("node 'sum_node' (Add): 9223372036854775807 + 1 overflows int64") != std::string::npos);
  }
  {  // a Shape with start/end of a dynamic axis, imported with dynamic dims
    model_builder b = channel_shuffle();
    b.g.mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
    b.m.mutable_opset_import(0)->set_version(15);  // Shape's start and end
    b.attr(*b.g.mutable_node(0), "start", std::int64_t{0});
    const std::string why = refusal(b.m, {.dynamic_dims = true});
    CHECK(why.find("node 'shape_node' (Shape): attribute 'start'") != std::string::npos);
    CHECK(refusal(b.m) == "imported");  // static dims: batch takes its default extent, and Shape folds
  }
}

TEST_CASE("onnx import: Shape of a dynamic batch records GetVarShape, so a channel shuffle runs at any batch") {
  model_builder b = channel_shuffle();
  b.g.mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  b.g.mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  const tmod::TracedModule m = tmod::onnx::import_model(b.m, {.dims = {{"batch", 2}}, .dynamic_dims = true});
  std::ostringstream text;
  text << m.graph();
  CHECK(text.str().find("GetVarShape(x, )") != std::string::npos);
  CHECK(text.str().find("tensor.onnx_reshape_to(x, split_shape, )") != std::string::npos);  // allowzero=0
  const auto* split = static_cast<const tmod::graph::TensorNode*>(m.graph().get_node_by_name("split").as_unique());
  CHECK(split->shape_text() == "(batch, 2, 3, 2, 3)");
  CHECK(static_cast<const tmod::graph::TensorNode*>(m.graph().outputs()[0])->shape_text() == "(batch, 6, 2, 3)");
  for (const std::int64_t n : {1, 3}) {
    const Tensor x = tmod::uniform({n, 6, 2, 3}, -1.f, 1.f, 5);
    const std::vector<float> in = values(x), out = values(m(x));
    std::vector<float> want(in.size());
    for (std::int64_t i = 0; i < n; ++i)
      for (int c = 0; c < 6; ++c)  // output channel c = k * 2 + g reads input channel g * 3 + k
        for (int p = 0; p < 6; ++p)
          want[static_cast<std::size_t>((i * 6 + c) * 6 + p)] = in[static_cast<std::size_t>((i * 6 + c % 2 * 3 + c / 2) * 6 + p)];
    CHECK(out == want);
  }
}

TEST_CASE("onnx import: torch's x.view(x.size(0), -1) with a dynamic batch runs at batch 1 and 8") {
  model_builder b;
  b.input("x", {-1, 2, 3, 4});
  b.node("Shape", {"x"}, "shape");
  b.node("Gather", {"shape", b.ints("zero", {0}, true)}, "n");
  b.node("Unsqueeze", {"n", b.ints("axes", {0})}, "n1");
  b.attr(b.node("Concat", {"n1", b.ints("rest", {-1})}, "target"), "axis", std::int64_t{0});
  b.node("Reshape", {"x", "target"}, "y");
  b.output("y", {-1, 24});
  const tmod::TracedModule m = tmod::onnx::import_model(b.m, {.dims = {{"batch", 2}}, .dynamic_dims = true});
  CHECK(static_cast<const tmod::graph::TensorNode*>(m.graph().outputs()[0])->shape_text() == "(batch, 24)");
  for (const std::int64_t n : {1, 8}) {
    const Tensor x = tmod::uniform({n, 2, 3, 4}, -1.f, 1.f, 7);
    const Tensor y = m(x);
    CHECK(y.shape() == tmod::Shape{n, 24});
    CHECK(values(y) == values(x));  // a view keeps the elements in order
  }
  // Size of the dynamic input: the element count, as a value
  model_builder c;
  c.input("x", {-1, 2, 3, 4});
  c.node("Size", {"x"}, "count");
  c.node("Unsqueeze", {"count", c.ints("axes", {0})}, "target");
  c.node("Reshape", {"x", "target"}, "y");
  c.output("y", {-1});
  c.g.mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("count");
  const tmod::TracedModule flat = tmod::onnx::import_model(c.m, {.dims = {{"batch", 2}}, .dynamic_dims = true});
  CHECK(static_cast<const tmod::graph::TensorNode*>(flat.graph().outputs()[0])->shape_text() == "(batch*24,)");
  CHECK(flat(tmod::uniform({5, 2, 3, 4}, -1.f, 1.f, 3)).tensor().shape() == tmod::Shape{120});
}

namespace {

/// The batch of x (a rank-0 INT64 value computed at run time): Shape, Gather 0.
std::string batch_of(model_builder& b, const std::string& x) {
  b.node("Shape", {x}, x + "_shape");
  return b.node("Gather", {x + "_shape", b.ints(x + "_zero", {0}, true)}, x + "_n").output(0);
}
/// v (rank 0) as a 1-element vector.
std::string as_vector(model_builder& b, const std::string& v) {
  return b.node("Unsqueeze", {v, b.ints(v + "_axes", {0})}, v + "_1").output(0);
}
std::string concat(model_builder& b, const std::vector<std::string>& parts, const std::string& out) {
  proto::NodeProto& n = b.node("Concat", parts, out);
  b.attr(n, "axis", std::int64_t{0});
  return out;
}

/// ONNX's integer Div (truncating) and Mod (fmod 0: the divisor's sign; fmod 1: the dividend's).
std::int64_t trunc_div(std::int64_t a, std::int64_t b) { return a / b; }  // C++ truncates
std::int64_t mod(std::int64_t a, std::int64_t b, bool fmod) {
  const std::int64_t r = a % b;  // the dividend's sign
  return fmod || r == 0 || ((r < 0) == (b < 0)) ? r : r + b;
}

}  // namespace

TEST_CASE("onnx import: integer Div and Mod of a dynamic batch truncate and take the divisor's sign, at batch 1 and 8") {
  // m = batch - 5 is -4 at batch 1 and 3 at batch 8: both signs of dividend and divisor
  model_builder b;
  b.input("x", {-1, 6});
  const std::string n = batch_of(b, "x");
  b.node("Sub", {n, b.ints("five", {5}, true)}, "m");
  const std::vector<std::pair<std::int64_t, int>> cases{{3, -1}, {-3, -1}, {3, 0}, {-3, 0}, {3, 1}, {-3, 1}, {2, 0}};
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto [d, fmod] = cases[i];
    const std::string k = b.ints("d" + std::to_string(i), {d}, true), out = "q" + std::to_string(i);
    if (fmod < 0) {
      b.node("Div", {"m", k}, out);
    } else {
      proto::NodeProto& node = b.node("Mod", {"m", k}, out);
      b.attr(node, "fmod", std::int64_t{fmod});
    }
    parts.push_back(as_vector(b, out));
  }
  b.attr(b.node("Cast", {concat(b, parts, "qs")}, "y"), "to", std::int64_t{proto::TensorProto::FLOAT});
  b.output("y", {static_cast<std::int64_t>(cases.size())});
  // a Div of extents as a Reshape's target: (batch*6) / (batch*2) rows of x
  b.node("Mul", {n, b.ints("six", {6}, true)}, "n6");
  b.node("Mul", {n, b.ints("two", {2}, true)}, "n2");
  b.node("Div", {"n6", "n2"}, "three");
  b.node("Reshape", {"x", concat(b, {as_vector(b, "n2"), as_vector(b, "three")}, "target")}, "z");
  b.output("z", {-1, 3});
  b.g.mutable_output(1)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("rows");
  const tmod::TracedModule m = tmod::onnx::import_model(b.m, {.dims = {{"batch", 2}}, .dynamic_dims = true});
  for (const std::int64_t batch : {1, 8}) {
    const Tensor x = tmod::uniform({batch, 6}, -1.f, 1.f, 4);
    const tmod::Value out = m(x);
    std::vector<float> want;
    for (const auto& [d, fmod] : cases)
      want.push_back(static_cast<float>(fmod < 0 ? trunc_div(batch - 5, d) : mod(batch - 5, d, fmod == 1)));
    CHECK(values(out[0].tensor()) == want);
    CHECK(out[1].tensor().shape() == tmod::Shape{2 * batch, 3});
    CHECK(values(out[1].tensor()) == values(x));
  }
  // Mod of float32 values computed at run time is refused, naming the node
  model_builder f;
  f.input("x", {-1, 6});
  f.attr(f.node("Cast", {batch_of(f, "x")}, "nf"), "to", std::int64_t{proto::TensorProto::FLOAT});
  f.attr(f.node("Mod", {"nf", "nf"}, "y"), "fmod", std::int64_t{1});
  f.output("y", {});
  f.g.mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape();  // rank 0
  CHECK_THROWS_WITH_AS((void)tmod::onnx::import_model(f.m, {.dynamic_dims = true}),
                       doctest::Contains("node 'y_node' (Mod): Mod of float32 and float32 values computed at run time"),
                       tmod::value_error);
}

TEST_CASE("onnx import: a Reshape of a run-time shape copies the input's extent for a 0 (allowzero=0), at batch 1 and 8") {
  // target [batch % 8, 0, -1]: batch % 8 is 0 at batch 8, where ONNX copies the batch; the 0 copies 4
  model_builder b;
  b.input("x", {-1, 4, 6});
  b.attr(b.node("Mod", {batch_of(b, "x"), b.ints("eight", {8}, true)}, "r"), "fmod", std::int64_t{0});
  b.node("Reshape", {"x", concat(b, {as_vector(b, "r"), b.ints("zero", {0}), b.ints("rest", {-1})}, "target")}, "y");
  b.output("y", {-1, 4, 6});
  const tmod::TracedModule m = tmod::onnx::import_model(b.m, {.dims = {{"batch", 2}}, .dynamic_dims = true});
  std::ostringstream text;
  text << m.graph();
  CHECK(text.str().find("tensor.onnx_reshape_to(x, target, )") != std::string::npos);
  for (const std::int64_t batch : {1, 8}) {
    const Tensor x = tmod::uniform({batch, 4, 6}, -1.f, 1.f, 6);
    const Tensor y = m(x);
    CHECK(y.shape() == tmod::Shape{batch, 4, 6});
    CHECK(values(y) == values(x));
  }
  // with allowzero=1 the 0 is a zero extent: 0 * (-1) elements cannot hold x's
  b.attr(*b.g.mutable_node(b.g.node_size() - 1), "allowzero", std::int64_t{1});
  b.m.mutable_opset_import(0)->set_version(14);
  CHECK_THROWS_WITH((void)tmod::onnx::import_model(b.m, {.dims = {{"batch", 2}}, .dynamic_dims = true}),
                    doctest::Contains("the -1 extent cannot be inferred"));
}

TEST_CASE("onnx import: an Expand to a run-time shape records expand_to and follows the batch; two-way broadcasts are refused") {
  // a (1, 1, 4) token expanded to (batch, 3, 4)
  const auto expand_model = [](const std::vector<std::int64_t>& token, const std::vector<std::int64_t>& rest) {
    model_builder b;
    b.input("x", {-1, 2});
    b.input("t", token);
    b.node("Expand", {"t", concat(b, {as_vector(b, batch_of(b, "x")), b.ints("rest", rest)}, "shape")}, "y");
    b.output("y", {-1, 3, 4});
    return b;
  };
  const model_builder b = expand_model({1, 1, 4}, {3, 4});
  const tmod::TracedModule m = tmod::onnx::import_model(b.m, {.dims = {{"batch", 2}}, .dynamic_dims = true});
  std::ostringstream text;
  text << m.graph();
  CHECK(text.str().find("tensor.expand_to(t, shape, )") != std::string::npos);
  CHECK(static_cast<const tmod::graph::TensorNode*>(m.graph().outputs()[0])->shape_text() == "(batch, 3, 4)");
  const Tensor t = tmod::uniform({1, 1, 4}, -1.f, 1.f, 8);
  for (const std::int64_t batch : {1, 8}) {
    const Tensor y = m(tmod::zeros({batch, 2}), t);
    REQUIRE(y.shape() == tmod::Shape{batch, 3, 4});
    const std::vector<float> token = values(t), got = values(y);
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == token[i % 4]);
  }
  // ONNX keeps t's extent 3 under a 1 of the shape; expand_to broadcasts one way only: refused
  CHECK_THROWS_WITH_AS((void)tmod::onnx::import_model(expand_model({1, 3, 4}, {1, 4}).m, {.dynamic_dims = true}),
                       doctest::Contains("node 'y_node' (Expand): a shape computed at run time that broadcasts the input both ways"),
                       tmod::value_error);
  // a shape of lower rank than the input: refused too
  CHECK_THROWS_WITH_AS((void)tmod::onnx::import_model(expand_model({1, 1, 1, 4}, {3, 4}).m, {.dynamic_dims = true}),
                       doctest::Contains("node 'y_node' (Expand): a shape computed at run time, of shape (3,)"),
                       tmod::value_error);
}

TEST_CASE("onnx import: Dropout in training mode with ratio 0 is the identity; another ratio is refused") {
  for (const bool zero : {true, false}) {
    model_builder b;
    b.input("x", {4});
    proto::TensorProto& ratio = *b.g.add_initializer();
    ratio.set_name("ratio");
    ratio.set_data_type(proto::TensorProto::FLOAT);
    ratio.add_float_data(zero ? 0.f : 0.5f);
    proto::TensorProto& mode = *b.g.add_initializer();
    mode.set_name("mode");
    mode.set_data_type(proto::TensorProto::BOOL);
    mode.add_int32_data(1);
    proto::NodeProto& d = b.node("Dropout", {"x", "ratio", "mode"}, "y");
    d.add_output("mask");  // named, never read
    b.output("y", {4});
    if (zero) {
      const tmod::TracedModule m = tmod::onnx::import_model(b.m);
      const Tensor x = tmod::uniform({4}, -1.f, 1.f, 9);
      CHECK(values(m(x)) == values(x));
    } else {
      CHECK_THROWS_WITH_AS((void)tmod::onnx::import_model(b.m), doctest::Contains("training_mode=true with a nonzero ratio"),
                           tmod::value_error);
    }
  }
}

}  // namespace tmod_test_onnx_shape_folding
