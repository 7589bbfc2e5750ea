// tracemod's half of the side-by-side with ONNX Runtime (bench/ort/side_by_side.sh):
//
//   tracemod_ort export <dir> resnet18|mobilenet_v2 <batch>
//       builds the model as examples/models does (torchvision's structure, random weights, eval
//       mode), traces it on a random 3x224x224 batch and writes <dir>/model.onnx
//       (tmod::onnx::export_model, static shapes), <dir>/input_0.npy and <dir>/output.npy (the
//       eager forward's output)
//   tracemod_ort compare <dir> resnet18|mobilenet_v2 <batch> <runs>
//       exports as above, then times the trace after optimize() and the file's import after
//       optimize(), alternated, one thread, and prints both medians in ms: what going through the
//       file costs tracemod
//   tracemod_ort time <dir> <threads> <runs>
//       imports <dir>/model.onnx, optimizes it with every registered pass, runs it twice untimed,
//       then <runs> times on <dir>/input_<i>.npy at <threads> threads, and prints the median in ms
//       and the largest absolute difference from <dir>/output.npy over its largest absolute value
//
// Both engines run the same file: the graph ONNX Runtime optimizes is the one tracemod imports and
// optimizes, with the same weights, whoever wrote it (this exporter or tests/reference/zoo_export.py).
#include <models/mobilenet_v2.hpp>
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/io/npy.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/passes.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

namespace tmod = tracemod;
namespace fs = std::filesystem;

namespace {

std::string relative_error(const tmod::Tensor& got, const fs::path& expected_file) {
  if (!fs::exists(expected_file)) return "-";
  const tmod::Tensor expected = tmod::io::load_npy(expected_file);
  if (got.shape() != expected.shape())
    throw tmod::shape_error("output " + got.shape().to_string() + " is not output.npy's " + expected.shape().to_string());
  double diff = 0, scale = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(got.data<float>()[i] - expected.data<float>()[i])));
    scale = std::max(scale, static_cast<double>(std::abs(expected.data<float>()[i])));
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1e", diff / std::max(scale, 1e-30));
  return text;
}

double median(std::vector<double> ms) {
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}

double time_run_ms(const tmod::TracedModule& model, const std::vector<tmod::graph::NodeValue>& inputs) {
  const auto start = std::chrono::steady_clock::now();
  (void)model.run(inputs);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The trace after optimize() against the import of its export after optimize(), alternated runs.
void compare_forms(const tmod::TracedModule& traced, const fs::path& file, const tmod::Tensor& x, int runs) {
  const tmod::TracedModule direct = tmod::optimize(traced, tmod::registered_passes());
  const tmod::TracedModule imported = tmod::optimize(tmod::onnx::import_model(file), tmod::registered_passes());
  const std::vector<tmod::graph::NodeValue> inputs{tmod::Value(x)};
  tmod::set_num_threads(1);
  std::vector<double> a, b;
  for (int i = -1; i < runs; ++i) {  // the first round untimed
    const double ta = time_run_ms(direct, inputs), tb = time_run_ms(imported, inputs);
    if (i < 0) continue;
    a.push_back(ta);
    b.push_back(tb);
  }
  std::printf("trace + optimize() %.3f ms, import + optimize() %.3f ms\n", median(a), median(b));
}

template <class Net>
void export_net(Net net, const fs::path& dir, std::int64_t batch, int compare_runs) {
  net.eval();
  const tmod::Tensor x = tmod::randn({batch, 3, 224, 224}, 7);
  fs::create_directories(dir);
  const tmod::TracedModule traced = tmod::trace_module(net, x);
  tmod::onnx::export_model(traced, dir / "model.onnx", {.dynamic_batch = false});
  tmod::io::save_npy(dir / "input_0.npy", x);
  tmod::io::save_npy(dir / "output.npy", net(x));
  if (compare_runs > 0) compare_forms(traced, dir / "model.onnx", x, compare_runs);
}

int export_model(const fs::path& dir, const std::string& model, std::int64_t batch, int compare_runs = 0) {
  if (model == "resnet18") {
    export_net(models::resnet18(), dir, batch, compare_runs);
  } else if (model == "mobilenet_v2") {
    export_net(models::MobileNetV2(), dir, batch, compare_runs);
  } else {
    std::fprintf(stderr, "tracemod_ort: unknown model '%s' (resnet18 or mobilenet_v2)\n", model.c_str());
    return 2;
  }
  return 0;
}

int time_model(const fs::path& dir, int threads, int runs) {
  const tmod::TracedModule model =
      tmod::optimize(tmod::onnx::import_model(dir / "model.onnx"), tmod::registered_passes());
  std::vector<tmod::graph::NodeValue> inputs;
  for (int i = 0; fs::exists(dir / ("input_" + std::to_string(i) + ".npy")); ++i)
    inputs.emplace_back(tmod::Value(tmod::io::load_npy(dir / ("input_" + std::to_string(i) + ".npy"))));
  tmod::set_num_threads(threads);
  const std::string error = relative_error(model.run(inputs).tensor(), dir / "output.npy");
  (void)model.run(inputs);
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) ms.push_back(time_run_ms(model, inputs));
  std::printf("%.3f %s\n", median(ms), error.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 4 && args[0] == "export") return export_model(args[1], args[2], std::stoll(args[3]));
    if (args.size() == 5 && args[0] == "compare")
      return export_model(args[1], args[2], std::stoll(args[3]), std::max(1, std::stoi(args[4])));
    if (args.size() == 4 && args[0] == "time") return time_model(args[1], std::stoi(args[2]), std::max(1, std::stoi(args[3])));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tracemod_ort: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr,
               "usage: tracemod_ort export <dir> resnet18|mobilenet_v2 <batch>\n"
               "       tracemod_ort compare <dir> resnet18|mobilenet_v2 <batch> <runs>\n"
               "       tracemod_ort time <dir> <threads> <runs>\n");
  return 2;
}
