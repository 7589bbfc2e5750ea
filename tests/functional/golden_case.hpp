// Runs a functional op over every golden case the manifest lists for it, mapping each case's
// manifest parameters (tests/reference/README.md) to the op's params. Every parameter a case lists
// must be read by the test: one it cannot map fails that case instead of being ignored, so a case
// the generator gains later is either tested or reported.
#pragma once

#include "golden.hpp"

#include <tracemod/functional/params.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace golden_case {

namespace tmod = tracemod;
namespace F = tracemod::functional;

/// The manifest parameters of one case, read by name; remembers which ones were read.
class Args {
 public:
  Args(std::string case_name, golden::Params params) : case_(std::move(case_name)), params_(std::move(params)) {}

  [[nodiscard]] F::pair2 pair(std::string_view key, F::pair2 fallback) {
    return optional_pair(key).value_or(fallback);
  }

  [[nodiscard]] std::optional<F::pair2> optional_pair(std::string_view key) {
    const std::string* v = find(key);
    if (!v) return std::nullopt;
    const std::vector<std::int64_t> xs = golden::ints(*v);
    if (xs.size() == 1) return F::pair2{xs[0]};
    if (xs.size() == 2) return F::pair2{xs[0], xs[1]};
    throw bad(key, *v, "one or two integers");
  }

  [[nodiscard]] std::int64_t integer(std::string_view key, std::int64_t fallback) {
    return optional_integer(key).value_or(fallback);
  }

  [[nodiscard]] std::optional<std::int64_t> optional_integer(std::string_view key) {
    const std::string* v = find(key);
    if (!v) return std::nullopt;
    const std::vector<std::int64_t> xs = golden::ints(*v);
    if (xs.size() != 1) throw bad(key, *v, "one integer");
    return xs[0];
  }

  [[nodiscard]] bool flag(std::string_view key, bool fallback) {
    const std::string* v = find(key);
    if (!v) return fallback;
    if (*v == "true") return true;
    if (*v == "false") return false;
    throw bad(key, *v, "true or false");
  }

  [[nodiscard]] double real(std::string_view key, double fallback) {
    const std::string* v = find(key);
    if (!v) return fallback;
    std::size_t used = 0;
    const double x = std::stod(*v, &used);
    if (used != v->size()) throw bad(key, *v, "a number");
    return x;
  }

  /// A string, written as Python's repr ('reflect').
  [[nodiscard]] std::string text(std::string_view key, std::string fallback) {
    const std::string* v = find(key);
    if (!v) return fallback;
    if (v->size() < 2 || v->front() != '\'' || v->back() != '\'') throw bad(key, *v, "a quoted string");
    return v->substr(1, v->size() - 2);
  }

  /// A list of integers the op cannot do without (reshape's target_shape, transpose's pattern).
  [[nodiscard]] F::int_list required_list(std::string_view key) {
    const std::string* v = find(key);
    if (!v) throw std::runtime_error(case_ + ": the manifest gives no '" + std::string(key) + "'");
    const std::vector<std::int64_t> xs = golden::ints(*v);
    if (xs.size() > F::int_list::max_size) throw bad(key, *v, "at most 8 integers");
    F::int_list list;
    switch (xs.size()) {  // int_list is built from braces only
      case 0: break;
      case 1: list = {xs[0]}; break;
      case 2: list = {xs[0], xs[1]}; break;
      case 3: list = {xs[0], xs[1], xs[2]}; break;
      case 4: list = {xs[0], xs[1], xs[2], xs[3]}; break;
      case 5: list = {xs[0], xs[1], xs[2], xs[3], xs[4]}; break;
      case 6: list = {xs[0], xs[1], xs[2], xs[3], xs[4], xs[5]}; break;
      case 7: list = {xs[0], xs[1], xs[2], xs[3], xs[4], xs[5], xs[6]}; break;
      default: list = {xs[0], xs[1], xs[2], xs[3], xs[4], xs[5], xs[6], xs[7]}; break;
    }
    return list;
  }

  /// A list of integers with a default (the reductions' axis), nullopt when the case gives none.
  [[nodiscard]] std::optional<F::int_list> optional_list(std::string_view key) {
    if (!params_.contains(key)) return std::nullopt;
    return required_list(key);
  }

  /// A pair the op cannot do without (pooling's kernel_size).
  [[nodiscard]] F::pair2 required_pair(std::string_view key) {
    const std::optional<F::pair2> p = optional_pair(key);
    if (!p) throw std::runtime_error(case_ + ": the manifest gives no '" + std::string(key) + "'");
    return *p;
  }

  /// Throws unless every parameter of the case was read.
  void finish() const {
    for (const auto& [key, value] : params_)
      if (!read_.contains(key))
        throw std::runtime_error(case_ + ": manifest parameter " + key + "=" + value +
                                 " is not mapped to an argument of the op");
  }

 private:
  const std::string* find(std::string_view key) {
    const auto it = params_.find(key);
    if (it == params_.end()) return nullptr;
    read_.insert(it->first);
    return &it->second;
  }
  std::runtime_error bad(std::string_view key, const std::string& value, std::string_view expected) const {
    return std::runtime_error(case_ + ": manifest parameter " + std::string(key) + "=" + value + " is not " +
                              std::string(expected));
  }

  std::string case_;
  golden::Params params_;
  std::set<std::string, std::less<>> read_;
};

/// The tensor inputs of a case, of which there must be between `least` and `most`.
inline std::vector<tmod::Tensor> inputs(const std::string& op_case, std::size_t least, std::size_t most) {
  std::vector<tmod::Tensor> in = golden::inputs(op_case);
  if (in.size() < least || in.size() > most)
    throw std::runtime_error(op_case + ": " + std::to_string(in.size()) + " input files, expected " +
                             std::to_string(least) + (least == most ? "" : " to " + std::to_string(most)));
  return in;
}

/// The ops for_each_case has run in this process (manifest.cpp checks them after the run).
[[nodiscard]] inline std::set<std::string, std::less<>>& ran_ops() {
  static std::set<std::string, std::less<>> ops;
  return ops;
}

/// Calls run(case_name, args) for every case of `op`; a case that throws (an op error, a parameter
/// the test does not map) fails with its name and the message, and the other cases still run.
/// Returns the number of cases.
template <class Run>
std::size_t for_each_case(std::string_view op, Run run) {
  const std::vector<std::string> names = golden::cases(op);
  REQUIRE_MESSAGE(!names.empty(), "the manifest lists no case of " << op);
  ran_ops().emplace(op);
  for (const std::string& name : names) {
    INFO("golden case " << name);
    try {
      Args args(name, golden::params(name));
      run(name, args);
      args.finish();
    } catch (const std::exception& e) {
      FAIL_CHECK(std::string(e.what()));  // the INFO above names the case
    }
  }
  return names.size();
}

}  // namespace golden_case
