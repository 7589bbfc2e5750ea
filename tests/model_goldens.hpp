// The whole-network goldens of tests/data/<model>/ (tests/reference/gen_modules.py,
// gen_mobilenet_v2.py): one <state key>.npy per state_dict entry beside input.npy and output.npy.
#pragma once

#include <golden.hpp>

#include <tracemod/nn/state_dict.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

/// The input of tests/data/dynamic_shapes (gen_dynamic_shapes.py): element i (row-major) of a
/// (batch, 3, size, size) tensor is float32(sin(0.01 * i)).
[[nodiscard]] inline tmod::Tensor sine_input(std::int64_t batch, std::int64_t size) {
  tmod::Tensor x = tmod::Tensor::empty({batch, 3, size, size}, tmod::DType::float32);
  float* p = x.data<float>();
  for (std::int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<float>(std::sin(0.01 * static_cast<double>(i)));
  return x;
}

/// The shapes of tests/data/dynamic_shapes, and PyTorch's output of `model` ("resnet18",
/// "mobilenet_v2") for sine_input(batch, size).
struct dynamic_case {
  std::int64_t batch, size;
};
inline constexpr dynamic_case dynamic_cases[] = {{1, 224}, {3, 160}, {8, 224}};
[[nodiscard]] inline std::string dynamic_case_name(std::string_view model, const dynamic_case& c) {
  return std::string(model) + "_b" + std::to_string(c.batch) + "_" + std::to_string(c.size);
}
[[nodiscard]] inline tmod::Tensor dynamic_output(std::string_view model, const dynamic_case& c) {
  return tmod::io::load_npy(data_dir() / "dynamic_shapes" / (dynamic_case_name(model, c) + ".npy"));
}

}  // namespace golden
