// Module::load_state_dict: copies a state dict into a module's own tensors, all or nothing.
#pragma once

#include <tracemod/nn/module.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tracemod {


inline IncompatibleKeys Module::load_state_dict(const StateDict& dict, bool strict) {
  IncompatibleKeys report;
  std::string mismatches;
  std::vector<std::pair<Tensor*, const Tensor*>> copies;
  std::unordered_set<std::string> own_keys;
  // Every path of a shared sub-module is a key (state_dict lists each); the later copy wins.
  for (auto& [name, t] : collect_tensors<Tensor>("", true, true, true, false)) {
    own_keys.insert(name);
    if (!dict.contains(name)) {
      report.missing_keys.push_back(name);
      continue;
    }
    const Tensor& source = dict.at(name);
    if (!source.defined() || source.shape() != t.shape() || source.dtype() != t.dtype()) {
      report.mismatched_keys.push_back(name);
      const auto what = [](const Tensor& x) {
        return x.defined() ? x.shape().to_string() + " " + std::string(dtype_name(x.dtype()))
                           : std::string("undefined");
      };
      mismatches += (mismatches.empty() ? "" : ", ") + ("'" + name + "' is " + what(t) + " in the module but " +
                                                        what(source) + " in the state dict");
      continue;
    }
    copies.emplace_back(&t, &source);
  }
  for (const auto& [key, value] : dict)
    if (!own_keys.contains(key)) report.unexpected_keys.push_back(key);

  if (strict && !report.empty()) {
    const auto quoted = [](const std::vector<std::string>& keys) {
      std::string s;
      for (const auto& k : keys) s += (s.empty() ? "'" : ", '") + k + "'";
      return s;
    };
    std::string message = "load_state_dict: errors in loading the state dict of " + std::string(type_name()) + ":";
    if (!report.missing_keys.empty()) message += " missing keys: " + quoted(report.missing_keys) + ";";
    if (!report.unexpected_keys.empty()) message += " unexpected keys: " + quoted(report.unexpected_keys) + ";";
    if (!mismatches.empty()) message += " shape/dtype mismatch: " + mismatches + ";";
    message.pop_back();
    throw module_error(message);
  }
  for (const auto& copy : copies) {
    Tensor destination = *copy.first;  // a handle: writes reach the module's buffer
    const Tensor& source = *copy.second;
    // memmove: the source may be this very tensor (loading a module's own state_dict).
    visit_dtype(destination.dtype(), [&]<class T>(T) {
      std::memmove(destination.data<T>(), source.data<T>(), destination.nbytes());
    });
  }
  return report;
}

}  // namespace tracemod
