// The module goldens of tests/data/modules/ (written by tests/reference/gen_modules.py):
// modules/<case>.<part>.npy with parts in0, in1, out, the PyTorch state_dict entries by key, and
// after.<key> for the state after a training-mode call.
#pragma once

#include <golden.hpp>
#include <run_checks.hpp>

#include <tracemod/nn/module.hpp>
#include <tracemod/nn/state_dict.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace module_golden {

namespace tmod = tracemod;

/// The cases a test has asked for (through case_path or state) in this process.
[[nodiscard]] inline std::set<std::string, std::less<>>& used_cases() {
  static std::set<std::string, std::less<>> used;
  return used;
}

[[nodiscard]] inline std::string case_path(std::string_view name) {
  used_cases().emplace(name);
  return "modules/" + std::string(name);
}

/// After a full run: every case gen_modules.py wrote (a file <case>.in0.npy) was used by a test.
[[maybe_unused]] inline const bool every_case_used = run_checks::add("module goldens", [] {
  std::vector<std::string> problems;
  const std::string suffix = ".in0.npy";
  for (const auto& entry : std::filesystem::directory_iterator(golden::data_dir() / "modules")) {
    const std::string file = entry.path().filename().string();
    if (!file.ends_with(suffix)) continue;
    const std::string name = file.substr(0, file.size() - suffix.size());
    if (!used_cases().contains(name))
      problems.push_back("the generated module case " + name + " is used by no test");
  }
  return problems;
});

/// The state_dict PyTorch saved for a case (every key it has, so a strict load checks both ways);
/// `after`: the state after the training-mode call.
[[nodiscard]] inline tmod::StateDict state(std::string_view name, bool after = false) {
  used_cases().emplace(name);
  const std::string prefix = std::string(name) + "." + (after ? "after." : "");
  std::vector<std::pair<std::string, std::filesystem::path>> found;
  for (const auto& entry : std::filesystem::directory_iterator(golden::data_dir() / "modules")) {
    const std::string file = entry.path().filename().string();
    if (!file.starts_with(prefix) || !file.ends_with(".npy")) continue;
    const std::string key = file.substr(prefix.size(), file.size() - prefix.size() - 4);
    const bool io =
        key == "out" || (key.starts_with("in") && key.size() > 2 &&
                         std::all_of(key.begin() + 2, key.end(), [](char c) { return c >= '0' && c <= '9'; }));
    if (io || (!after && key.starts_with("after."))) continue;
    found.emplace_back(key, entry.path());
  }
  std::sort(found.begin(), found.end());
  tmod::StateDict d;
  for (const auto& [key, path] : found) d.insert(key, tmod::io::load_npy(path));
  return d;
}

}  // namespace module_golden
