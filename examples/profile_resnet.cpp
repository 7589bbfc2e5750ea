// Profiles a full-width ResNet-18 (random weights) on one 224x224 image and writes what the
// profiling tools give: the summary table (shape inference, no kernels), the profile table (median
// of 10 runs), a Chrome / Perfetto trace and the graph drawn by time share. It also times plain
// forwards, alternated with profiled ones, to show what profiling costs.
//
//   profile_resnet [out_dir]        (default: the working directory)
//   dot -Tsvg resnet18_profile.dot -o resnet18_profile.svg
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/profile.hpp>
#include <tracemod/traced_module.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace tmod = tracemod;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
  std::cout << "wrote " << path.string() << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : ".";
  std::filesystem::create_directories(dir);
  tmod::manual_seed(0);
  models::ResNet net = models::resnet18();
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 224, 224}, 1);
  const tmod::TracedModule traced = tmod::trace_module(net, x);

  const tmod::model_summary summary = tmod::summary(traced, tmod::spec({1, 3, 224, 224}));
  write(dir / "resnet18_summary.txt", summary.table());

  // Plain forwards and profiled ones, alternated, so both see the same machine state.
  std::vector<double> plain, profiled, calls;
  tmod::profile_result profile;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 4; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      (void)traced(x);
      plain.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    profile = tmod::profile(traced, {x}, {.runs = 4, .warmup = round == 0 ? 1 : 0});
    profiled.push_back(profile.forward_seconds);
    calls.push_back(profile.leaf_seconds());
  }
  profile = tmod::profile(traced, {x}, {.runs = 10});
  write(dir / "resnet18_profile.txt", profile.table());
  profile.save_chrome_trace((dir / "resnet18_trace.json").string());
  std::cout << "wrote " << (dir / "resnet18_trace.json").string() << "\n";
  write(dir / "resnet18_profile.dot", tmod::to_dot(traced, profile));

  std::cout << "\n" << profile.table(10) << "\n";
  const std::string s = summary.table();
  std::cout << s.substr(s.find("Total params")) << "\n";
  const double p = median(plain), f = median(profiled), c = median(calls);
  std::printf("calls cover %.1f %% of the median profiled run\n", 100 * profile.coverage());
  std::printf("plain forward %.3f ms; profiled forward %.3f ms (%+.1f %%); calls sum to %.3f ms (%+.1f %% of plain)\n",
              p * 1e3, f * 1e3, 100 * (f / p - 1), c * 1e3, 100 * (c / p - 1));
}
