// ONNX import of invalid models: each is refused with a format_error that names the node or value at
// fault, before anything is built. The models are made with ONNX's protobuf classes from one valid
// model (x -> Relu -> y), changed in one place each.
#include <tracemod/onnx.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tmod_test_onnx_robustness {

namespace {

namespace tmod = tracemod;
namespace proto = tracemod::onnx::proto;

void set_type(proto::ValueInfoProto& v, int elem_type, const std::vector<std::int64_t>& shape) {
  proto::TypeProto_Tensor& t = *v.mutable_type()->mutable_tensor_type();
  t.set_elem_type(elem_type);
  t.mutable_shape()->clear_dim();
  for (std::int64_t d : shape) t.mutable_shape()->add_dim()->set_dim_value(d);
}

/// A valid model: float x of shape (3,), node 'r' (Relu) writes y, the output.
proto::ModelProto valid() {
  proto::ModelProto m;
  m.set_ir_version(proto::IR_VERSION);
  m.add_opset_import()->set_version(13);
  proto::GraphProto& g = *m.mutable_graph();
  g.set_name("g");
  proto::ValueInfoProto& x = *g.add_input();
  x.set_name("x");
  set_type(x, proto::TensorProto::FLOAT, {3});
  proto::NodeProto& r = *g.add_node();
  r.set_name("r");
  r.set_op_type("Relu");
  r.add_input("x");
  r.add_output("y");
  proto::ValueInfoProto& y = *g.add_output();
  y.set_name("y");
  set_type(y, proto::TensorProto::FLOAT, {3});
  return m;
}

proto::NodeProto& add_node(proto::GraphProto& g, const std::string& name, const std::string& op,
                           const std::vector<std::string>& in, const std::string& out) {
  proto::NodeProto& n = *g.add_node();
  n.set_name(name);
  n.set_op_type(op);
  for (const std::string& i : in) n.add_input(i);
  n.add_output(out);
  return n;
}

proto::TensorProto& add_weight(proto::GraphProto& g, const std::string& name, std::int64_t n) {
  proto::TensorProto& t = *g.add_initializer();
  t.set_name(name);
  t.set_data_type(proto::TensorProto::FLOAT);
  t.add_dims(n);
  for (std::int64_t i = 0; i < n; ++i) t.add_float_data(static_cast<float>(i));
  return t;
}

/// The format_error message of importing `m` (a failed check if the import succeeds or throws another error).
std::string refusal(const proto::ModelProto& m, const tmod::onnx::ImportOptions& options = {}) {
  try {
    (void)tmod::onnx::import_model(m, options);
  } catch (const tmod::format_error& e) {
    return e.what();
  } catch (const tmod::error& e) {
    FAIL("not a format_error: " << e.what());
  }
  FAIL("the invalid model imported");
  return "";
}

void check_contains(const std::string& what, const std::vector<std::string>& parts) {
  CAPTURE(what);
  for (const std::string& p : parts) CHECK(what.find(p) != std::string::npos);
}

}  // namespace

TEST_CASE("onnx import: the valid model that the invalid ones are made from imports and runs") {
  tmod::TracedModule m = tmod::onnx::import_model(valid());
  const tmod::Tensor y = m(tmod::arange(-1.0, 2.0));  // -1, 0, 1
  const auto v = y.values<float>();
  CHECK(std::vector<float>(v.begin(), v.end()) == std::vector<float>{0.f, 0.f, 1.f});
}

TEST_CASE("onnx import: a model without a valid opset or IR version is refused") {
  proto::ModelProto m = valid();
  m.mutable_opset_import(0)->set_version(99);
  check_contains(refusal(m), {"opset 99 of the default domain", "defines opsets 1 to 17"});
  m.clear_opset_import();
  check_contains(refusal(m), {"opset_import names no opset of the default ONNX domain"});
  check_contains(refusal(proto::ModelProto{}), {"the model has no ir_version"});

  const auto path = std::filesystem::temp_directory_path() / "tracemod_onnx_empty.onnx";
  std::ofstream(path, std::ios::binary).close();
  try {
    (void)tmod::onnx::import_model(path);
    FAIL("a zero-length file imported");
  } catch (const tmod::format_error& e) {
    check_contains(e.what(), {"tracemod_onnx_empty.onnx' is empty (0 bytes)"});
  }
  std::filesystem::remove(path);
}

TEST_CASE("onnx import: values with no source, two sources, or read before they are written are refused") {
  proto::ModelProto m = valid();
  m.mutable_graph()->clear_output();
  check_contains(refusal(m), {"graph 'g': the graph declares no outputs"});

  m = valid();
  add_node(*m.mutable_graph(), "n", "Neg", {"x"}, "y");
  check_contains(refusal(m), {"value 'y' is produced by two nodes, node 'r' (Relu) and node 'n' (Neg)"});

  m = valid();
  add_node(*m.mutable_graph(), "n", "Neg", {"y"}, "x");
  check_contains(refusal(m), {"node 'n' (Neg) writes 'x', which is a graph input"});

  m = valid();
  add_weight(*m.mutable_graph(), "w", 3);
  add_weight(*m.mutable_graph(), "w", 3);
  check_contains(refusal(m), {"initializer 'w' is given twice"});

  m = valid();
  m.mutable_graph()->mutable_node(0)->set_input(0, "z");
  check_contains(refusal(m), {"node 'r' (Relu) reads 'z', which no node, input or initializer produces"});

  // a = Add(x, b), b = Relu(a): a cycle, named node by node in the direction values flow.
  m = valid();
  proto::GraphProto& g = *m.mutable_graph();
  g.clear_node();
  add_node(g, "na", "Add", {"x", "b"}, "a");
  add_node(g, "nb", "Relu", {"a"}, "b");
  g.mutable_output(0)->set_name("b");
  check_contains(refusal(m), {"the nodes form a cycle: node 'na' (Add) -> 'a' -> node 'nb' (Relu) -> 'b' -> node 'na' (Add)"});
  // A node that reads its own output is a cycle of one.
  g.mutable_node(1)->set_input(0, "b");
  check_contains(refusal(m), {"cycle: node 'nb' (Relu) -> 'b' -> node 'nb' (Relu)"});

  // No cycle, only the order: Neg reads y before Relu writes it.
  m = valid();
  add_node(*m.mutable_graph(), "n", "Neg", {"x"}, "z");
  m.mutable_graph()->mutable_node()->SwapElements(0, 1);
  m.mutable_graph()->mutable_node(0)->set_input(0, "y");
  check_contains(refusal(m), {"node 'n' (Neg) reads 'y' before node 'r' (Relu) produces it (ONNX lists nodes in topological order)"});
}

TEST_CASE("onnx import: an output computed differently from its declaration is refused") {
  proto::ModelProto m = valid();
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(proto::TensorProto::INT64);
  check_contains(refusal(m), {"output 'y' is declared INT64; the graph computes FLOAT"});
  m = valid();
  set_type(*m.mutable_graph()->mutable_output(0), proto::TensorProto::FLOAT, {4});
  check_contains(refusal(m), {"output 'y' is declared of shape (4,); the graph computes (3,)"});
  m = valid();
  set_type(*m.mutable_graph()->mutable_output(0), proto::TensorProto::FLOAT, {3, 1});
  check_contains(refusal(m), {"output 'y' is declared of shape (3, 1); the graph computes (3,)"});

  // A symbolic extent of an output must be the value its input bound.
  m = valid();
  for (auto* v : {m.mutable_graph()->mutable_input(0), m.mutable_graph()->mutable_output(0)})
    v->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("n");
  CHECK(tmod::onnx::import_model(m, {.dims = {{"n", 5}}}).graph().inputs().size() == 2);
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(3);
  check_contains(refusal(m, {.dims = {{"n", 5}}}), {"output 'y' is declared of shape (3,); the graph computes (5,)"});
}

TEST_CASE("onnx import: input extents that are negative or too large are refused, naming the input") {
  proto::ModelProto m = valid();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(-3);
  check_contains(refusal(m), {"input 'x': axis 0 has the negative extent -3"});

  m = valid();
  auto& shape = *m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape.mutable_dim(0)->set_dim_param("n");
  shape.add_dim()->set_dim_value(3);
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("n");
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
  const std::int64_t huge = std::int64_t{1} << 62;
  check_contains(refusal(m, {.dims = {{"n", huge}}}),
                 {"input 'x'", "(4611686018427387904, 3)", "overflows", "symbolic dimensions 'n' = 4611686018427387904"});
  check_contains(refusal(m, {.dims = {{"n", -1}}}), {"input 'x': axis 0 has the negative extent -1 (symbolic dimension 'n')"});
  shape.mutable_dim(0)->set_dim_value(huge);
  shape.mutable_dim()->RemoveLast();
  check_contains(refusal(m), {"input 'x'", "(4611686018427387904,)", "exceeds the largest allocation"});
}

TEST_CASE("onnx import: tensor data of the wrong size says how many bytes or values it holds and needs") {
  proto::ModelProto m = valid();
  proto::TensorProto& w = add_weight(*m.mutable_graph(), "w", 6);
  w.clear_float_data();
  w.set_raw_data(std::string(6, '\0'));
  check_contains(refusal(m), {"initializer: tensor 'w' holds 6 bytes of raw_data; its dims (6,) need 6 FLOAT elements of 4 bytes"});
  w.clear_raw_data();
  for (int i = 0; i < 5; ++i) w.add_float_data(1.f);
  check_contains(refusal(m), {"tensor 'w' holds 5 values in float_data; its dims (6,) need 6"});
  w.set_data_type(proto::TensorProto::COMPLEX64);
  check_contains(refusal(m), {"tensor 'w' holds 5 values in float_data; its dims (6,) need 12 (two per COMPLEX64 element)"});
  w.set_data_type(proto::TensorProto::UNDEFINED);
  check_contains(refusal(m), {"tensor 'w' has no valid element type (UNDEFINED)"});
  w.set_data_type(proto::TensorProto::FLOAT);
  w.set_dims(0, -6);
  check_contains(refusal(m), {"initializer: tensor 'w' has the negative extent -6"});
}

TEST_CASE("onnx import: a shape of another element type than ONNX's INT64 is refused, not converted") {
  proto::ModelProto m = valid();
  proto::GraphProto& g = *m.mutable_graph();
  add_weight(g, "shape", 1).set_float_data(0, 3.f);
  add_node(g, "s", "Reshape", {"y", "shape"}, "z");
  proto::ValueInfoProto& z = *g.add_output();
  z.set_name("z");
  set_type(z, proto::TensorProto::FLOAT, {3});
  check_contains(refusal(m), {"node 's' (Reshape): shape: tensor 'shape' has element type FLOAT, where ONNX defines INT64"});
}

TEST_CASE("onnx import: an attribute of the wrong type says so, naming the node") {
  proto::ModelProto m = valid();
  proto::NodeProto& pool = *m.mutable_graph()->mutable_node(0);
  pool.set_op_type("MaxPool");
  set_type(*m.mutable_graph()->mutable_input(0), proto::TensorProto::FLOAT, {1, 1, 4, 4});
  set_type(*m.mutable_graph()->mutable_output(0), proto::TensorProto::FLOAT, {1, 1, 2, 2});
  tmod::onnx::set_attr(pool, "kernel_shape", 2.0);
  check_contains(refusal(m), {"Mismatched attribute type", "kernel_shape", "Name: r OpType: MaxPool"});

  // The accessors the import table reads attributes with check the type themselves.
  try {
    (void)tmod::onnx::attr_ints(pool, "kernel_shape");
    FAIL("a FLOAT attribute read as INTS");
  } catch (const tmod::format_error& e) {
    check_contains(e.what(), {"attribute 'kernel_shape' has type FLOAT, where ONNX defines INTS"});
  }
  CHECK_THROWS_AS((void)tmod::onnx::attr_int(pool, "kernel_shape", 0), tmod::format_error);
  CHECK(tmod::onnx::attr_float(pool, "kernel_shape", 0.f) == 2.f);
}

TEST_CASE("onnx import: a pool with a zero stride is refused, naming the attribute") {
  proto::ModelProto m = valid();
  proto::NodeProto& pool = *m.mutable_graph()->mutable_node(0);
  pool.set_op_type("AveragePool");
  set_type(*m.mutable_graph()->mutable_input(0), proto::TensorProto::FLOAT, {1, 1, 5, 5});
  set_type(*m.mutable_graph()->mutable_output(0), proto::TensorProto::FLOAT, {1, 1, 3, 3});
  tmod::onnx::set_attr(pool, "kernel_shape", std::vector<std::int64_t>{3, 3});
  tmod::onnx::set_attr(pool, "strides", std::vector<std::int64_t>{2, 0});
  tmod::onnx::set_attr(pool, "auto_pad", std::string("SAME_UPPER"));  // divides by the stride
  std::string what;
  try {
    (void)tmod::onnx::import_model(m);
  } catch (const tmod::error& e) {
    what = e.what();
  }
  check_contains(what, {"strides", "is not positive"});
}

}  // namespace tmod_test_onnx_robustness
