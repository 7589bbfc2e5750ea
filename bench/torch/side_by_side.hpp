// tracemod next to libtorch, in one process, on the same weights and the same input: the pieces
// every model comparison of tracemod_bench_torch shares.
//
// A model NAME is exported by bench/torch/export_models.py into models_dir()/NAME/ (TorchScript
// model.pt plus one .npy per state_dict entry). register_side_by_side(NAME, make[,
// make_optimized]) then registers, for 1 and 2 threads and batches 1 and 8,
//   NAME/tracemod_eager   the tracemod model built by make(state_dict) (weights loaded from the .npy)
//   NAME/tracemod_optimized  the one make_optimized(state_dict) builds (a traced module run through
//                         tmod::optimize), when given
//   NAME/torch_traced     the TorchScript module as traced (libtorch's eager kernels)
//   NAME/torch_best       torch::jit::freeze + torch::jit::optimize_for_inference of it
// with counters images_per_s and max_abs_diff (the batch-1 output against the one PyTorch saved),
// and, with make_optimized, two ratios timed alternated in one benchmark (alternated.hpp: blocks of
// forwards of one, then of the other, so the neighbours' load reaches both alike), at batch 1:
//   NAME/tracemod_vs_torch_best/threads  tracemod_optimized against torch_best (counters ms_tracemod,
//                         ms_torch, ratio = ms_tracemod / ms_torch, the medians)
//   NAME/tracemod_scaling tracemod_optimized at 1 and at 2 threads (run_scaling's counters)
// A missing export does not fail the run: each benchmark is skipped with the command that makes it.
#pragma once

#include <tracemod/core/factories.hpp>
#include <tracemod/core/parallel.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/io/npy.hpp>
#include <tracemod/nn/state_dict.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/traced_module.hpp>

#include <alternated.hpp>
#include <threads.hpp>

#include <benchmark/benchmark.h>
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tracemod::bench::torch_side {

namespace tmod = tracemod;

/// Where export_models.py wrote the models: $TRACEMOD_TORCH_MODELS, else the directory the build
/// configured (the target tracemod_torch_models writes there).
inline std::filesystem::path models_dir() {
  if (const char* env = std::getenv("TRACEMOD_TORCH_MODELS")) return env;
  return TRACEMOD_TORCH_MODELS_DIR;
}

inline std::string how_to_export() {
  return "no TorchScript export in " + models_dir().string() +
         ": run `/usr/bin/python3 bench/torch/export_models.py " + models_dir().string() +
         "` (or build the target tracemod_torch_models), or set TRACEMOD_TORCH_MODELS";
}

/// Every <key>.npy of an export directory except the input and output samples, under its key.
inline tmod::StateDict load_state_dict_dir(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".npy") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  tmod::StateDict d;
  for (const auto& path : files) {
    const std::string key = path.stem().string();
    if (key != "input" && key != "output") d.insert(key, tmod::io::load_npy(path));
  }
  return d;
}

/// A float32 tracemod tensor viewed as a libtorch tensor (no copy; t must outlive the view).
inline torch::Tensor as_torch(const tmod::Tensor& t) {
  std::vector<std::int64_t> sizes(t.shape().begin(), t.shape().end());
  return torch::from_blob(const_cast<float*>(t.data<float>()), sizes, torch::kFloat32);
}

inline double max_abs_diff(const float* a, const float* b, std::int64_t n) {
  double m = 0;
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

/// Everything one model's benchmarks share, loaded on first use.
struct loaded_model {
  using forward_fn = std::function<tmod::Tensor(const tmod::Tensor&)>;
  bool present = false;
  forward_fn tracemod_forward;
  forward_fn tracemod_optimized;
  torch::jit::Module traced, best;
  tmod::Tensor sample_input, sample_output;
};

/// Builds the tracemod side: a forward for the model with this state_dict loaded (strictly).
using tracemod_factory = std::function<loaded_model::forward_fn(const tmod::StateDict&)>;

/// A make_optimized for the model `load(state_dict)` returns (a shared_ptr): its forward traces the
/// module once per batch size (on the first call, before timing), flattens the trace when `flatten`
/// (a pass rewrites one graph at a time, so a fusion across a module boundary needs it) and
/// optimizes it with every pass.
template <class Load>
tracemod_factory traced_and_optimized(Load load, bool flatten) {
  return [load, flatten](const tmod::StateDict& weights) -> loaded_model::forward_fn {
    auto traced = std::make_shared<std::map<std::int64_t, tmod::TracedModule>>();
    return [net = load(weights), traced, flatten](const tmod::Tensor& x) {
      const std::vector<std::string> all{"FuseConvBn", "FuseAddMul", "BackwardFoldScale", "FuseConvEpilogue",
                                         "FuseElemwise"};
      auto it = traced->find(x.shape()[0]);
      if (it == traced->end()) {
        tmod::TracedModule m = tmod::trace_module(*net, x);
        it = traced->emplace(x.shape()[0], tmod::optimize(flatten ? m.flatten() : m, all)).first;
      }
      return it->second(x).tensor();
    };
  };
}

inline loaded_model& load_model(const std::string& name, const tracemod_factory& make,
                                const tracemod_factory& make_optimized) {
  static std::map<std::string, std::unique_ptr<loaded_model>> cache;
  auto& slot = cache[name];
  if (slot) return *slot;
  slot = std::make_unique<loaded_model>();
  const std::filesystem::path dir = models_dir() / name;
  if (!std::filesystem::exists(dir / "model.pt")) return *slot;
  const tmod::StateDict weights = load_state_dict_dir(dir);
  slot->tracemod_forward = make(weights);
  if (make_optimized) slot->tracemod_optimized = make_optimized(weights);
  slot->traced = torch::jit::load((dir / "model.pt").string());
  slot->traced.eval();
  torch::jit::Module frozen = torch::jit::freeze(slot->traced);
  slot->best = torch::jit::optimize_for_inference(frozen);
  slot->sample_input = tmod::io::load_npy(dir / "input.npy");
  slot->sample_output = tmod::io::load_npy(dir / "output.npy");
  slot->present = true;
  return *slot;
}

enum class runner { tracemod_eager, tracemod_optimized, torch_traced, torch_best };

/// The tracemod forward of a tracemod runner, or null for a libtorch one.
inline const loaded_model::forward_fn* tracemod_of(const loaded_model& m, runner which) {
  if (which == runner::tracemod_eager) return &m.tracemod_forward;
  if (which == runner::tracemod_optimized) return &m.tracemod_optimized;
  return nullptr;
}

/// One forward of `which` on x.
inline void run_once(loaded_model& m, runner which, const tmod::Tensor& x, const torch::Tensor& tx) {
  if (const auto* f = tracemod_of(m, which)) {
    benchmark::DoNotOptimize((*f)(x));
    return;
  }
  torch::jit::Module& module = which == runner::torch_traced ? m.traced : m.best;
  benchmark::DoNotOptimize(module.forward({tx}).toTensor());
}

/// The batch-1 output of `which` on the saved sample against PyTorch's saved output.
inline double sample_error(loaded_model& m, runner which) {
  const std::int64_t n = m.sample_output.numel();
  if (const auto* f = tracemod_of(m, which)) {
    const tmod::Tensor y = (*f)(m.sample_input);
    return max_abs_diff(y.data<float>(), m.sample_output.data<float>(), n);
  }
  torch::jit::Module& module = which == runner::torch_traced ? m.traced : m.best;
  const torch::Tensor y = module.forward({as_torch(m.sample_input)}).toTensor().contiguous();
  return max_abs_diff(y.data_ptr<float>(), m.sample_output.data<float>(), n);
}

inline void run_benchmark(benchmark::State& state, const std::string& name, const tracemod_factory& make,
                          const tracemod_factory& make_optimized, runner which) {
  loaded_model& m = load_model(name, make, make_optimized);
  if (!m.present) {
    state.SkipWithError(how_to_export().c_str());
    return;
  }
  const auto threads = static_cast<int>(state.range(0));
  const std::int64_t batch = state.range(1);
  const int threads_before = tmod::get_num_threads();
  tmod::set_num_threads(threads);
  at::set_num_threads(threads);
  torch::NoGradGuard no_grad;
  const double error = sample_error(m, which);
  tmod::Shape shape = m.sample_input.shape();
  shape[0] = batch;
  const tmod::Tensor x = tmod::randn(shape, 11);
  const torch::Tensor tx = as_torch(x);
  run_once(m, which, x, tx);  // warm-up: scratch buffers, libtorch's profiling executor
  for (auto _ : state) run_once(m, which, x, tx);
  state.counters["images_per_s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["max_abs_diff"] = error;
  tmod::set_num_threads(threads_before);
}

/// Forwards per block of the alternated benchmarks: the first is untimed, so 3 timed of each per
/// iteration (ResNet-18 at batch 1: about 0.2 s an iteration).
inline constexpr int model_block_calls = 4;

/// A loaded model and a random batch-1 input for it, as a tracemod tensor and a libtorch view of it.
struct batch1_run {
  loaded_model& m;
  tmod::Tensor x = tmod::randn(m.sample_input.shape(), 11);
  torch::Tensor tx = as_torch(x);
};

/// NAME/tracemod_vs_torch_best: tracemod_optimized against torch_best at state.range(0) threads,
/// batch 1, alternated.
inline void run_against_torch(benchmark::State& state, loaded_model& m) {
  const int threads_before = tmod::get_num_threads();
  const auto threads = static_cast<int>(state.range(0));
  tmod::set_num_threads(threads);
  at::set_num_threads(threads);
  torch::NoGradGuard no_grad;
  batch1_run r{m};
  const alternated_times t = run_alternated(
      state, model_block_calls, [&] { run_once(m, runner::tracemod_optimized, r.x, r.tx); },
      [&] { run_once(m, runner::torch_best, r.x, r.tx); });
  state.counters["ms_tracemod"] = t.median_a;
  state.counters["ms_torch"] = t.median_b;
  state.counters["ratio"] = t.median_a / t.median_b;
  tmod::set_num_threads(threads_before);
}

/// NAME/tracemod_scaling: tracemod_optimized at 1 and at 2 threads, batch 1, alternated.
inline void run_tracemod_scaling(benchmark::State& state, loaded_model& m) {
  torch::NoGradGuard no_grad;
  batch1_run r{m};
  run_scaling(state, [&] { run_once(m, runner::tracemod_optimized, r.x, r.tx); }, model_block_calls);
}

/// Registers NAME/{tracemod_eager, tracemod_optimized (with make_optimized), torch_traced, torch_best}
/// at threads {1, 2} x batch {1, 8}.
inline void register_side_by_side(const std::string& name, tracemod_factory make, tracemod_factory make_optimized = {}) {
  const std::pair<const char*, runner> runners[] = {
      {"tracemod_eager", runner::tracemod_eager},
      {"tracemod_optimized", runner::tracemod_optimized},
      {"torch_traced", runner::torch_traced},
      {"torch_best", runner::torch_best},
  };
  for (const auto& [label, which] : runners) {
    if (which == runner::tracemod_optimized && !make_optimized) continue;
    benchmark::RegisterBenchmark(
        (name + "/" + label).c_str(),
        [name, make, make_optimized, which = which](benchmark::State& s) {
          run_benchmark(s, name, make, make_optimized, which);
        })
        ->ArgNames({"threads", "batch"})
        ->ArgsProduct({{1, 2}, {1, 8}})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.5);
  }
  if (!make_optimized) return;
  const auto alternated = [name, make, make_optimized](void (*body)(benchmark::State&, loaded_model&)) {
    return [name, make, make_optimized, body](benchmark::State& s) {
      loaded_model& m = load_model(name, make, make_optimized);
      if (!m.present) {
        s.SkipWithError(how_to_export().c_str());
        return;
      }
      body(s, m);
    };
  };
  benchmark::RegisterBenchmark((name + "/tracemod_vs_torch_best").c_str(), alternated(run_against_torch))
      ->ArgName("threads")
      ->Arg(1)
      ->Arg(2)
      ->Unit(benchmark::kMillisecond)
      ->UseManualTime()
      ->MinTime(3.0);
  benchmark::RegisterBenchmark((name + "/tracemod_scaling").c_str(), alternated(run_tracemod_scaling))
      ->Unit(benchmark::kMillisecond)
      ->UseManualTime()
      ->MinTime(3.0);
}

}  // namespace tracemod::bench::torch_side
