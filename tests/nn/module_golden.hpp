// The module goldens of tests/data/modules/ (written by tests/reference/gen_modules.py):
// modules/<case>.<part>.npy with parts in0, in1, out, the PyTorch state_dict entries by key, and
// after.<key> for the state after a training-mode call.
#pragma once

#include <golden.hpp>

#include <tracemod/nn/module.hpp>
#include <tracemod/nn/state_dict.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace module_golden {

namespace tmod = tracemod;

[[nodiscard]] inline std::string case_path(std::string_view name) { return "modules/" + std::string(name); }

/// The state_dict PyTorch saved for a case (every key it has, so a strict load checks both ways);
/// `after`: the state after the training-mode call.
[[nodiscard]] inline tmod::StateDict state(std::string_view name, bool after = false) {
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
