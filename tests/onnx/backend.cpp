// ONNX's backend test suite (Debian's libonnx-testdata: data/node/* and data/pytorch-converted/*):
// every case whose ops, attributes and element types tracemod supports is imported, interpreted on
// each of its test data sets and compared with the stored outputs (ONNX's own tolerances: rtol 1e-3,
// atol 1e-7). Every other case is skipped with the import's reason. A case that runs must pass.
#include <tracemod/onnx.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tmod_test_onnx_backend {

namespace {

namespace tmod = tracemod;
namespace proto = tracemod::onnx::proto;
namespace fs = std::filesystem;

struct case_result {
  std::string name;
  enum class kind { passed, failed, skipped } k;
  std::string reason;
};

std::vector<fs::path> sorted(const fs::path& dir, std::string_view prefix) {
  std::vector<fs::path> v;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind(prefix, 0) == 0) v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

/// "input_10.pb" after "input_9.pb".
std::vector<fs::path> numbered(const fs::path& dir, std::string_view prefix) {
  std::vector<fs::path> v;
  for (std::size_t i = 0;; ++i) {
    const fs::path p = dir / (std::string(prefix) + std::to_string(i) + ".pb");
    if (!fs::exists(p)) return v;
    v.push_back(p);
  }
}

std::string first_problems(const std::string& what) {
  const auto nl = what.find('\n');
  std::string s = nl == std::string::npos ? what : what.substr(nl + 1);
  std::replace(s.begin(), s.end(), '\n', ';');
  return s.size() > 300 ? s.substr(0, 300) + "..." : s;
}

/// Whether `got` matches `want` as numpy.testing.assert_allclose(want, got, rtol=1e-3, atol=1e-7).
std::string compare(const tmod::Tensor& got, const tmod::Tensor& want) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype())
    return "shape " + got.shape().to_string() + ", expected " + want.shape().to_string();
  if (got.dtype() == tmod::DType::boolean)
    return std::equal(got.values<bool>().begin(), got.values<bool>().end(), want.values<bool>().begin())
               ? ""
               : "bool values differ";
  if (got.dtype() == tmod::DType::int32)
    return std::equal(got.values<std::int32_t>().begin(), got.values<std::int32_t>().end(),
                      want.values<std::int32_t>().begin())
               ? ""
               : "int32 values differ";
  const auto g = got.values<float>(), w = want.values<float>();
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double a = g[i], b = w[i];
    if (std::isnan(a) && std::isnan(b)) continue;
    if (!(std::abs(a - b) <= 1e-7 + 1e-3 * std::abs(b)))
      return "element " + std::to_string(i) + " is " + std::to_string(a) + ", expected " + std::to_string(b);
  }
  return "";
}

/// A stored output as a tensor; an INT64 one as int32, as tracemod computes ONNX's INT64 integers
/// (value_error for a number outside int32).
tmod::Tensor expected(const proto::TensorProto& t) {
  if (t.data_type() != proto::TensorProto::INT64) return tmod::onnx::from_proto(t, "output");
  proto::TensorProto narrowed;
  narrowed.set_data_type(proto::TensorProto::INT32);
  narrowed.mutable_dims()->CopyFrom(t.dims());
  for (const std::int64_t v : tmod::onnx::integers_of(t, "output")) {
    if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
      throw tmod::value_error("output holds the INT64 " + std::to_string(v) + ", outside int32");
    narrowed.add_int32_data(static_cast<std::int32_t>(v));
  }
  return tmod::onnx::from_proto(narrowed, "output");
}

case_result run_case(const fs::path& dir) {
  case_result r{dir.parent_path().filename().string() + "/" + dir.filename().string(), case_result::kind::skipped, ""};
  proto::ModelProto model;
  tmod::onnx::read_proto(dir / "model.onnx", model);
  std::set<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<std::string> inputs;  // input_<i>.pb feeds the i-th graph input that is no initializer
  for (const auto& v : model.graph().input())
    if (initializers.count(v.name()) == 0) inputs.push_back(v.name());
  const std::vector<std::string> constants = tmod::onnx::constant_input_names(model);
  const std::vector<fs::path> data_sets = sorted(dir, "test_data_set_");
  if (data_sets.empty()) {
    r.reason = "no test data set";
    return r;
  }

  for (const fs::path& set : data_sets) {
    const std::vector<fs::path> in_files = numbered(set, "input_"), out_files = numbered(set, "output_");
    if (in_files.size() != inputs.size()) {
      r.k = case_result::kind::skipped;
      r.reason = "the data set feeds " + std::to_string(in_files.size()) + " of " + std::to_string(inputs.size()) +
                 " inputs (optional inputs left out)";
      return r;
    }
    tmod::onnx::ImportOptions options;
    std::vector<tmod::graph::NodeValue> values;
    try {
      for (std::size_t i = 0; i < in_files.size(); ++i) {
        proto::TensorProto t;
        tmod::onnx::read_proto(in_files[i], t);
        if (std::find(constants.begin(), constants.end(), inputs[i]) != constants.end())
          options.constant_inputs[inputs[i]] = t;
        else
          values.emplace_back(tmod::Value(tmod::onnx::from_proto(t, inputs[i])));
      }
    } catch (const tmod::error& e) {
      r.reason = e.what();
      return r;
    }
    tmod::TracedModule m("unset");
    try {
      m = tmod::onnx::import_model(model, options);
    } catch (const tmod::error& e) {
      r.reason = first_problems(e.what());
      return r;
    }
    try {
      const tmod::Value out = m.run(values);
      std::vector<tmod::Tensor> got;
      if (out.is_tensor())
        got.push_back(out.tensor());
      else
        for (const tmod::Value& v : out.items()) got.push_back(v.tensor());
      if (got.size() != out_files.size()) throw tmod::value_error(std::to_string(got.size()) + " outputs");
      for (std::size_t i = 0; i < got.size(); ++i) {
        proto::TensorProto t;
        tmod::onnx::read_proto(out_files[i], t);
        const std::string diff = compare(got[i], expected(t));
        if (!diff.empty()) throw tmod::value_error(set.filename().string() + " output " + std::to_string(i) + ": " + diff);
      }
    } catch (const tmod::error& e) {
      r.k = case_result::kind::failed;
      r.reason = e.what();
      return r;
    }
  }
  r.k = case_result::kind::passed;
  return r;
}

/// The required ops: their cases must run, or be skipped for an attribute, element type or
/// form (1-D/3-D, extra outputs) tracemod lacks, never for the op itself.
bool is_required(const std::string& name) {
  static const std::vector<std::string> ops{
      "conv", "gemm", "matmul", "relu", "add", "sub", "mul", "div", "maxpool", "averagepool", "avgpool",
      "globalaveragepool", "batchnorm", "flatten", "reshape", "transpose", "concat", "softmax", "sigmoid", "tanh",
      "exp", "neg", "min", "max", "linear"};
  std::string base = name.substr(name.find('/') + 1);
  std::transform(base.begin(), base.end(), base.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (base.rfind("test_", 0) == 0) base = base.substr(5);
  return std::any_of(ops.begin(), ops.end(), [&](const std::string& op) {
    return base.rfind(op, 0) == 0 && (base.size() == op.size() || base[op.size()] == '_' || std::isdigit(static_cast<unsigned char>(base[op.size()])));
  });
}

}  // namespace

TEST_CASE("onnx backend tests: node and pytorch-converted cases import, run and match") {
  const fs::path root = TRACEMOD_ONNX_TESTDATA_DIR;
  if (root.empty() || !fs::is_directory(root / "node")) {
    MESSAGE("skipped: libonnx-testdata is not installed");
    return;
  }
  std::vector<case_result> results;
  for (const char* suite : {"node", "pytorch-converted"})
    for (const fs::path& dir : sorted(root / suite, "test_")) results.push_back(run_case(dir));

  std::map<case_result::kind, int> count;
  for (const case_result& r : results) {
    ++count[r.k];
    const char* tag = r.k == case_result::kind::passed ? "PASS" : r.k == case_result::kind::failed ? "FAIL" : "skip";
    std::cout << tag << " " << r.name << (r.reason.empty() ? "" : ": " + r.reason) << "\n";
  }
  const int run = count[case_result::kind::passed] + count[case_result::kind::failed];
  std::cout << "onnx backend tests: " << results.size() << " cases, " << run << " run, " << count[case_result::kind::passed]
            << " passed, " << count[case_result::kind::failed] << " failed, " << count[case_result::kind::skipped]
            << " skipped\n";
  std::cout << "skipped cases of the ops the issue names (conv, gemm, matmul, relu, add/sub/mul/div, pools, batch norm, "
               "flatten, reshape, transpose, concat, softmax, sigmoid, tanh, exp, neg, min/max):\n";
  for (const case_result& r : results)
    if (r.k == case_result::kind::skipped && is_required(r.name)) std::cout << "  " << r.name << ": " << r.reason << "\n";
  for (const case_result& r : results) {
    CAPTURE(r.name);
    CAPTURE(r.reason);
    CHECK(r.k != case_result::kind::failed);
  }
  CHECK(run >= 100);
  // Resize and Upsample where their attributes mean PyTorch's interpolate (nearest with floor, linear
  // with half_pixel or align_corners on whole extents) run; align_corners on 4 * 0.6 columns does not
  const auto outcome = [&](const std::string& name) {
    for (const case_result& r : results)
      if (r.name == name) return r.k;
    return case_result::kind::failed;
  };
  for (const char* name : {"node/test_resize_upsample_scales_nearest", "node/test_resize_upsample_scales_linear",
                           "node/test_resize_upsample_scales_linear_align_corners",
                           "node/test_resize_downsample_scales_linear", "node/test_upsample_nearest"})
    CHECK_MESSAGE(outcome(name) == case_result::kind::passed, name);
  CHECK(outcome("node/test_resize_downsample_scales_linear_align_corners") == case_result::kind::skipped);
}

}  // namespace tmod_test_onnx_backend
