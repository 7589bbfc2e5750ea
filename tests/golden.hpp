// Golden data for tests: the PyTorch-generated .npy files and manifest under tests/data (see
// tests/reference/README.md), and a closeness check that reports where and by how much it fails.
#pragma once

#include <tracemod/core/tensor.hpp>
#include <tracemod/io/npy.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#ifndef TRACEMOD_TEST_DATA_DIR
#error "TRACEMOD_TEST_DATA_DIR must be the absolute path of tests/data (the CMake build defines it)"
#endif

namespace golden {

namespace tmod = tracemod;

/// A case's non-tensor arguments: name -> value as written ("2", "1,2", "true", "0.1").
using Params = std::map<std::string, std::string, std::less<>>;

[[nodiscard]] inline std::filesystem::path data_dir() { return TRACEMOD_TEST_DATA_DIR; }

/// tests/data/<op>/<case>.<part>.npy, e.g. path("conv2d/k3_s2_p1", "in0").
[[nodiscard]] inline std::filesystem::path path(std::string_view op_case, std::string_view part) {
  return data_dir() / (std::string(op_case) + "." + std::string(part) + ".npy");
}

[[nodiscard]] inline bool has(std::string_view op_case, std::string_view part) {
  return std::filesystem::exists(path(op_case, part));
}

/// One tensor of a case: "in0", "in1", ..., "out", "running_mean", "running_var".
[[nodiscard]] inline tmod::Tensor load(std::string_view op_case, std::string_view part) {
  return tmod::io::load_npy(path(op_case, part));
}

/// in0, in1, ...: every input the case has, in order.
[[nodiscard]] inline std::vector<tmod::Tensor> inputs(std::string_view op_case) {
  std::vector<tmod::Tensor> result;
  for (std::string part = "in0"; has(op_case, part); part = "in" + std::to_string(result.size()))
    result.push_back(load(op_case, part));
  return result;
}

/// tests/data/manifest.txt: "<op>/<case>" -> its non-tensor arguments. Parsed once.
[[nodiscard]] inline const std::map<std::string, Params, std::less<>>& manifest() {
  static const auto parsed = [] {
    const std::filesystem::path file = data_dir() / "manifest.txt";
    std::ifstream in(file);
    if (!in) throw std::runtime_error("golden: cannot open " + file.string());
    std::map<std::string, Params, std::less<>> cases;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::istringstream words(line);
      std::string name, word;
      if (!(words >> name)) continue;
      Params& params = cases[name];
      while (words >> word) {
        const std::size_t eq = word.find('=');
        if (eq == std::string::npos || eq == 0)
          throw std::runtime_error("golden: " + file.string() + ":" + std::to_string(number) + ": '" + word +
                                   "' is not key=value");
        params.emplace(word.substr(0, eq), word.substr(eq + 1));
      }
    }
    return cases;
  }();
  return parsed;
}

/// The arguments of one case; throws if the manifest does not list it.
[[nodiscard]] inline const Params& params(std::string_view op_case) {
  const auto& cases = manifest();
  const auto it = cases.find(op_case);
  if (it == cases.end()) throw std::runtime_error("golden: no case '" + std::string(op_case) + "' in the manifest");
  return it->second;
}

/// The "<op>/<case>" names of one op, sorted.
[[nodiscard]] inline std::vector<std::string> cases(std::string_view op) {
  std::vector<std::string> names;
  const std::string prefix = std::string(op) + "/";
  for (const auto& entry : manifest())
    if (entry.first.starts_with(prefix)) names.push_back(entry.first);
  return names;
}

/// "2" -> {2}; "1,2" -> {1, 2}; "-1,3" -> {-1, 3}.
[[nodiscard]] inline std::vector<std::int64_t> ints(std::string_view value) {
  std::vector<std::int64_t> result;
  std::istringstream in{std::string(value)};
  for (std::string item; std::getline(in, item, ',');) {
    std::size_t used = 0;
    result.push_back(std::stoll(item, &used));
    if (used != item.size()) throw std::runtime_error("golden: '" + std::string(value) + "' is not a list of integers");
  }
  return result;
}

/// The outcome of comparing two tensors: `ok`, or a message naming the first offending element
/// and the one with the largest absolute error.
struct Comparison {
  bool ok = true;
  std::string message;
};

namespace detail {

inline std::string index_string(const tmod::Shape& shape, std::size_t flat) {
  std::vector<std::int64_t> index(shape.rank());
  for (std::size_t axis = shape.rank(); axis-- > 0;) {
    index[axis] = static_cast<std::int64_t>(flat) % shape[axis];
    flat /= static_cast<std::size_t>(shape[axis]);
  }
  std::string s = "[";
  for (std::size_t i = 0; i < index.size(); ++i) s += (i ? ", " : "") + std::to_string(index[i]);
  return s + "]";
}

inline std::vector<double> as_doubles(const tmod::Tensor& t) {
  if (t.dtype() == tmod::DType::float32) return {t.values<float>().begin(), t.values<float>().end()};
  return {t.values<std::int32_t>().begin(), t.values<std::int32_t>().end()};
}

}  // namespace detail

/// The largest |a - b| / max(1, |b|) over the elements of two float32 tensors of one shape.
[[nodiscard]] inline double max_rel_err(const tmod::Tensor& a, const tmod::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.values<float>();
  const auto y = b.values<float>();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    m = std::max(m, std::abs(double(x[i]) - y[i]) / std::max(1.0, std::abs(double(y[i]))));
  return m;
}

/// Elementwise |actual - expected| <= atol + rtol * |expected| (numpy.allclose); NaN matches
/// only NaN, an infinity only the same infinity. Shapes and dtypes must be equal.
[[nodiscard]] inline Comparison compare(const tmod::Tensor& actual, const tmod::Tensor& expected, double rtol,
                                        double atol) {
  if (!actual.defined() || !expected.defined())
    return {false, std::string(actual.defined() ? "expected" : "actual") + " tensor is undefined"};
  if (actual.shape() != expected.shape())
    return {false, "shape mismatch: actual " + actual.shape().to_string() + ", expected " +
                       expected.shape().to_string()};
  if (actual.dtype() != expected.dtype())
    return {false, "dtype mismatch: actual " + std::string(tmod::dtype_name(actual.dtype())) + ", expected " +
                       std::string(tmod::dtype_name(expected.dtype()))};

  const std::vector<double> a = detail::as_doubles(actual), e = detail::as_doubles(expected);
  std::size_t mismatches = 0, first = 0, worst = 0;
  double worst_error = -1.0;  // a NaN error ranks above every finite one
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double error = std::abs(a[i] - e[i]);
    const bool close = a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i])) || error <= atol + rtol * std::abs(e[i]);
    if (close) continue;
    if (mismatches++ == 0) first = i;
    const double ranked = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
    if (ranked > worst_error) {
      worst_error = ranked;
      worst = i;
    }
  }
  if (mismatches == 0) return {};

  std::ostringstream m;
  m.precision(9);
  m << mismatches << " of " << a.size() << " elements differ (rtol=" << rtol << ", atol=" << atol
    << ", shape " << actual.shape().to_string() << "); first at " << detail::index_string(actual.shape(), first)
    << ": actual " << a[first] << ", expected " << e[first] << "; largest error at "
    << detail::index_string(actual.shape(), worst) << ": actual " << a[worst] << ", expected " << e[worst]
    << " (abs error " << std::abs(a[worst] - e[worst]) << ")";
  return {false, m.str()};
}

/// A doctest CHECK that `actual` is close to `expected`; `what` (e.g. the case name) leads the
/// failure message.
inline void check_close(const tmod::Tensor& actual, const tmod::Tensor& expected, double rtol, double atol,
                        std::string_view what = {}) {
  const Comparison c = compare(actual, expected, rtol, atol);
  const std::string message = (what.empty() ? "" : std::string(what) + ": ") + c.message;
  CHECK_MESSAGE(c.ok, message);
}

}  // namespace golden
