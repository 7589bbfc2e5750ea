// tracemod_zoo <model dir>...: each directory written by tests/reference/zoo_export.py (model.onnx,
// input_<i>.npy, output.npy) is imported with tmod::onnx::import_model, run, and compared with
// PyTorch's output; an imported model is then optimized, saved and loaded, and exported to ONNX and
// imported again, and each form is run and compared too. Prints one Markdown table row per model
// (`cmake/tracemod.sh zoo` adds the header). The comparison: the largest absolute difference over
// the largest absolute expected value, as the model goldens of tests/ use.
#include <tracemod/io/npy.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/onnx.hpp>
#include <tracemod/passes.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace tmod = tracemod;
namespace fs = std::filesystem;

namespace {

// The first line of an error message, at most 160 characters, with '|' escaped for Markdown.
std::string short_message(const std::string& what) {
  std::string line = what.substr(0, what.find('\n'));
  if (line.size() > 160) line = line.substr(0, 157) + "...";
  std::string out;
  for (const char c : line) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// An import refusal as the ONNX op types it names and how often ("Pad x2, Shape x5"), else its
// first line. Each problem is a line "  node 'name' (OpType): why" or "  node #i (OpType): why";
// a problem that is not a node's (an input's, an output's) is shown as it is.
std::string refusal(const std::string& what) {
  std::map<std::string, int> ops;
  std::istringstream lines(what);
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    const std::size_t open = line.find(" ("), close = line.find("):");
    if (open != std::string::npos && close != std::string::npos && open < close) {
      ++ops[line.substr(open + 2, close - open - 2)];
    } else {  // not a node: an input or output the import cannot hold, named as the message names it
      const std::size_t start = line.find_first_not_of(' ');
      ++ops[short_message(line.substr(start == std::string::npos ? 0 : start))];
    }
  }
  if (ops.empty()) return short_message(what);
  std::string out;
  for (const auto& [op, count] : ops) out += (out.empty() ? "" : ", ") + op + (count > 1 ? " x" + std::to_string(count) : "");
  return out;
}

double relative_error(const tmod::Tensor& got, const tmod::Tensor& expected) {
  if (got.shape() != expected.shape())
    throw tmod::shape_error("output shape " + got.shape().to_string() + " is not PyTorch's " +
                            expected.shape().to_string());
  const float* a = got.data<float>();
  const float* b = expected.data<float>();
  double diff = 0, scale = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

std::vector<tmod::graph::NodeValue> load_inputs(const fs::path& dir) {
  std::vector<tmod::graph::NodeValue> inputs;
  for (int i = 0; fs::exists(dir / ("input_" + std::to_string(i) + ".npy")); ++i)
    inputs.emplace_back(tmod::Value(tmod::io::load_npy(dir / ("input_" + std::to_string(i) + ".npy"))));
  return inputs;
}

tmod::Tensor run(const tmod::TracedModule& model, const std::vector<tmod::graph::NodeValue>& inputs) {
  return model.run(inputs).tensor();
}

// One check of a form: its relative error as text, or why it failed.
std::string check(const std::function<tmod::Tensor()>& output, const tmod::Tensor& expected) {
  try {
    char text[32];
    std::snprintf(text, sizeof text, "%.1e", relative_error(output(), expected));
    return text;
  } catch (const std::exception& e) {
    return "fails: " + short_message(e.what());
  }
}

// The median times of five runs of the imported model and of its optimized form, alternated (each
// form has run once before, when it was checked); zero for a form that failed.
std::pair<double, double> median_times(const tmod::TracedModule& imported, const tmod::TracedModule* optimized,
                                       const std::vector<tmod::graph::NodeValue>& inputs) {
  if (optimized == nullptr) return {0.0, 0.0};
  const auto time = [&](const tmod::TracedModule& m) {
    const auto start = std::chrono::steady_clock::now();
    (void)run(m, inputs);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<double> a, b;
  for (int i = 0; i < 5; ++i) {
    a.push_back(time(imported));
    b.push_back(time(*optimized));
  }
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return {a[2], b[2]};
}

std::string milliseconds(double ms) {
  if (ms <= 0) return "";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", ms);
  return text;
}

void check_model(const fs::path& dir) {
  const std::string name = dir.filename().string();
  const tmod::Tensor expected = tmod::io::load_npy(dir / "output.npy");
  std::optional<tmod::TracedModule> imported_model;
  try {
    imported_model.emplace(tmod::onnx::import_model(dir / "model.onnx"));
    imported_model->eval();
  } catch (const std::exception& e) {
    std::cout << "| " << name << " | refused: " << refusal(e.what()) << " | | | | | | |\n";
    return;
  }
  const tmod::TracedModule& model = *imported_model;
  std::vector<tmod::graph::NodeValue> inputs;
  try {
    inputs = load_inputs(dir);
  } catch (const std::exception& e) {
    std::cout << "| " << name << " | input refused: " << short_message(e.what()) << " | | | | | | |\n";
    return;
  }
  const std::string imported = check([&] { return run(model, inputs); }, expected);
  std::optional<tmod::TracedModule> fast;
  const std::string optimized = check([&] {
    fast.emplace(tmod::optimize(model, tmod::registered_passes()));
    return run(*fast, inputs);
  }, expected);
  const auto [imported_ms, optimized_ms] =
      median_times(model, imported.rfind("fails", 0) == 0 || !fast ? nullptr : &*fast, inputs);
  const std::string reloaded = check([&] {
    std::stringstream bytes;
    tmod::save(model, bytes);
    const std::string s = bytes.str();
    return run(tmod::load(std::as_bytes(std::span(s.data(), s.size()))), inputs);
  }, expected);
  const std::string round_trip = check([&] {
    const fs::path path = fs::temp_directory_path() / ("tracemod_zoo_" + name + ".onnx");
    tmod::onnx::export_model(model, path);
    tmod::TracedModule again = tmod::onnx::import_model(path);
    fs::remove(path);
    return run(again, inputs);
  }, expected);
  std::cout << "| " << name << " | " << model.graph().exprs().as_count() << " exprs | " << imported << " | "
            << optimized << " | " << reloaded << " | " << round_trip << " | " << milliseconds(imported_ms) << " | "
            << milliseconds(optimized_ms) << " |\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: tracemod_zoo <model dir>... (directories written by tests/reference/zoo_export.py)\n";
    return 2;
  }
  tmod::set_num_threads(1);
  for (int i = 1; i < argc; ++i) {
    try {
      check_model(argv[i]);
    } catch (const std::exception& e) {
      std::cout << "| " << fs::path(argv[i]).filename().string() << " | " << short_message(e.what()) << " | | | | | | |\n";
    }
    std::cout.flush();
  }
  return 0;
}
