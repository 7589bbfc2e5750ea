// The whole-network goldens of tests/data/<model>/ (tests/reference/gen_modules.py,
// gen_mobilenet_v2.py): one <state key>.npy per state_dict entry beside input.npy and output.npy.
#pragma once

#include <golden.hpp>

#include <tracemod/nn/state_dict.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace golden {

/// The state_dict stored in tests/data/<model>/, keys in sorted order.
[[nodiscard]] inline tmod::StateDict model_state_dict(std::string_view model) {
  tmod::StateDict d;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir() / model))
    if (entry.path().extension() == ".npy") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    const std::string key = path.stem().string();
    if (key != "input" && key != "output") d.insert(key, tmod::io::load_npy(path));
  }
  return d;
}

/// The largest magnitude in t: logits near zero make an elementwise relative bound meaningless, so
/// network outputs are compared relative to their scale.
[[nodiscard]] inline double max_abs(const tmod::Tensor& t) {
  double scale = 0;
  for (float v : t.values<float>()) scale = std::max(scale, std::abs(static_cast<double>(v)));
  return scale;
}

}  // namespace golden
