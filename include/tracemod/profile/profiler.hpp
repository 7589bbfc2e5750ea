// tmod::profile(traced, inputs, {.runs = 10}): runs a traced module's graph expr by expr and times
// each call. The profiler walks the graphs itself (each expr through Expr::interpret, a user module
// call by descending into its callee graph), so the interpreter's own path carries no timer. Each
// call's time is the median over the runs; its FLOPs and bytes come from its cost
// (functional/cost.hpp), so the result gives achieved GFLOP/s and GB/s per call, per op type and per
// module. profile_result::table() renders them; save_chrome_trace writes the median run as a
// Chrome / Perfetto trace.
#pragma once

#include <tracemod/core/parallel.hpp>
#include <tracemod/functional/cost.hpp>
#include <tracemod/graph/cost.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/profile/format.hpp>
#include <tracemod/profile/machine_peak.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <span>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tracemod {

struct profile_options {
  int runs = 10;    ///< timed runs; times are medians over them
  int warmup = 1;   ///< untimed runs first (caches, allocator, lazily built state)
  bool peak = true; ///< compare rates with the machine's peak (probes run once per process and thread count)
};

/// One call of a profiled forward.
struct expr_profile {
  const graph::Expr* expr = nullptr;
  std::string name;    ///< the module's dotted path ("layer1.0.conv1") or the op's output node name
  std::string type;    ///< op target ("nn.relu", "__add__") or module type ("Conv2d", "BasicBlock")
  std::string module;  ///< dotted path of the user module whose graph holds the call ("" for the top)
  std::size_t depth = 0;
  bool leaf = true;    ///< an op or a builtin module (its time is not the sum of other rows)
  double seconds = 0;  ///< median over the runs
  functional::op_cost cost;
  double start = 0;    ///< seconds from the forward's start, in the median run (the timeline)
  double span = 0;     ///< duration in the median run

  [[nodiscard]] double gflops() const { return seconds > 0 ? static_cast<double>(cost.flops) / seconds / 1e9 : 0; }
  [[nodiscard]] double gbps() const { return seconds > 0 ? static_cast<double>(cost.bytes()) / seconds / 1e9 : 0; }
};

/// One chunk of a kernel split over threads (parallel_for), in the run the timeline shows.
struct chunk_span {
  int worker = 0;   ///< the chunk's index in its split: chunk k runs on worker thread k
  double start = 0; ///< seconds from the forward's start
  double span = 0;
  std::size_t call = static_cast<std::size_t>(-1);  ///< index into profile_result::exprs of the call that split
};

/// Calls of one kind summed: an op type or a module.
struct profile_group {
  std::string key;
  std::int64_t calls = 0;
  double seconds = 0;
  functional::op_cost cost;
  [[nodiscard]] double gflops() const { return seconds > 0 ? static_cast<double>(cost.flops) / seconds / 1e9 : 0; }
  [[nodiscard]] double gbps() const { return seconds > 0 ? static_cast<double>(cost.bytes()) / seconds / 1e9 : 0; }
};

namespace profile_detail {

/// The CPU's model name from /proc/cpuinfo ("unknown CPU" elsewhere).
inline std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace profile_detail

/// What tmod::profile measured.
class profile_result {
 public:
  std::string model;
  std::string cpu;
  int threads = 1;
  int runs = 0;
  double forward_seconds = 0;        ///< median wall time of a whole profiled forward
  double timeline_seconds = 0;       ///< wall time of the run closest to the median (the trace's)
  std::vector<expr_profile> exprs;   ///< every call, in execution order (module calls before their body)
  std::vector<chunk_span> chunks;    ///< the kernels' chunks on worker threads, in the timeline's run
  std::optional<machine_peak> peak;  ///< the machine's limits at `threads` (unless options.peak is off)

  /// How close `e` runs to the limit that binds it (machine_peak::fraction); 0 without a peak.
  [[nodiscard]] double of_peak(const expr_profile& e) const { return peak ? peak->fraction(e.gflops(), e.gbps()) : 0; }
  [[nodiscard]] double of_peak(const profile_group& g) const { return peak ? peak->fraction(g.gflops(), g.gbps()) : 0; }

  /// Leaf calls (ops and builtin modules): their times add up to the forward's.
  [[nodiscard]] std::vector<const expr_profile*> leaves() const {
    std::vector<const expr_profile*> v;
    for (const expr_profile& e : exprs)
      if (e.leaf) v.push_back(&e);
    return v;
  }
  /// Sum of the leaf calls' median times.
  [[nodiscard]] double leaf_seconds() const {
    double s = 0;
    for (const expr_profile* e : leaves()) s += e->seconds;
    return s;
  }
  /// The share of the median run's wall time its leaf calls account for (the rest is the
  /// profiler's walk, getattrs and constants): near 1 when the per-call times are trustworthy.
  [[nodiscard]] double coverage() const {
    double s = 0;
    for (const expr_profile* e : leaves()) s += e->span;
    return timeline_seconds > 0 ? s / timeline_seconds : 0;
  }
  /// Leaf calls grouped by op target or builtin module type, slowest first (torch's key_averages()).
  [[nodiscard]] std::vector<profile_group> by_op() const {
    return group([](const expr_profile& e) { return e.type; });
  }
  /// Leaf calls grouped by the user module whose graph holds them, slowest first.
  [[nodiscard]] std::vector<profile_group> by_module() const {
    return group([this](const expr_profile& e) { return e.module.empty() ? model : e.module; });
  }

  /// The text report: header (model, CPU, threads, runs, times), then the calls, slowest first (at
  /// most `top` of them; 0 for all), then the groups by op type.
  [[nodiscard]] std::string table(std::size_t top = 0) const;

  /// Writes the median run as Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev): one
  /// complete event ("ph": "X") per call, nested by module, times in microseconds.
  void save_chrome_trace(const std::string& path) const;

 private:
  template <class Key>
  std::vector<profile_group> group(Key key) const {
    std::map<std::string, profile_group> m;
    for (const expr_profile* e : leaves()) {
      profile_group& g = m[key(*e)];
      g.key = key(*e);
      ++g.calls;
      g.seconds += e->seconds;
      g.cost += e->cost;
    }
    std::vector<profile_group> v;
    for (auto& [k, g] : m) v.push_back(std::move(g));
    std::stable_sort(v.begin(), v.end(), [](const profile_group& a, const profile_group& b) { return a.seconds > b.seconds; });
    return v;
  }
};

namespace profile_detail {

using clock = std::chrono::steady_clock;

inline constexpr std::size_t no_call = static_cast<std::size_t>(-1);

/// Collects the chunks of split kernels during one run, each tagged with the call running then, and
/// is installed as parallel_for's observer for its lifetime.
class chunk_log final : public detail::chunk_observer {
 public:
  explicit chunk_log(clock::time_point origin) : origin_(origin) {
    detail::installed_chunk_observer().store(this, std::memory_order_release);
  }
  chunk_log(const chunk_log&) = delete;
  chunk_log& operator=(const chunk_log&) = delete;
  ~chunk_log() { detail::installed_chunk_observer().store(nullptr, std::memory_order_release); }

  /// The row of the leaf call running now; set by the thread that walks the graph.
  std::atomic<std::size_t> current{no_call};

  void chunk(int index, clock::time_point start, clock::time_point end) noexcept override {
    const std::lock_guard lock(mutex_);
    try {
      spans_.push_back({index, std::chrono::duration<double>(start - origin_).count(),
                        std::chrono::duration<double>(end - start).count(), current.load(std::memory_order_relaxed)});
    } catch (...) {  // out of memory: the trace loses a chunk, the run goes on
    }
  }
  [[nodiscard]] std::vector<chunk_span> take() {
    const std::lock_guard lock(mutex_);
    return std::move(spans_);
  }

 private:
  clock::time_point origin_;
  std::mutex mutex_;
  std::vector<chunk_span> spans_;
};

/// One timed run: walks the graphs, recording each call's start and duration by its row.
class timed_walk {
 public:
  /// `first`: this run also describes the calls into `rows`; starts are measured from `origin`.
  timed_walk(std::vector<expr_profile>& rows, bool first, clock::time_point origin, chunk_log& chunks)
      : rows_(rows), first_(first), origin_(origin), chunks_(chunks) {}

  std::vector<double> starts, durations;  // by row

  std::vector<graph::NodeValue> run(const graph::Graph& g, const Module& self, std::span<const graph::NodeValue> inputs,
                                    const std::string& path, std::size_t depth) {
    std::unordered_map<const graph::Node*, graph::NodeValue> values;
    std::unordered_map<const graph::Node*, std::size_t> uses;
    const std::vector<graph::Node*> in = g.inputs();
    values[in[0]] = &self;
    for (std::size_t i = 0; i < inputs.size(); ++i) values[in[i + 1]] = inputs[i];
    for (const auto& e : g.expr_list_())
      for (const graph::Node* n : e->inputs()) ++uses[n];
    for (const graph::Node* n : g.outputs()) ++uses[n];  // never freed
    std::unordered_map<const graph::Node*, std::string> paths{{in[0], path}};
    for (const auto& up : g.expr_list_()) {
      const graph::Expr& e = *up;
      if (e.kind() == graph::ExprKind::input) continue;
      std::vector<graph::NodeValue> args;
      args.reserve(e.inputs().size());
      for (const graph::Node* n : e.inputs()) args.push_back(values.at(n));
      if (e.kind() == graph::ExprKind::get_attr && !e.output()->is_tensor()) {
        const std::string& base = paths[e.inputs()[0]];
        paths[e.output()] = base.empty() ? e.name() : base + "." + e.name();
      }
      std::vector<graph::NodeValue> out =
          e.is_call() ? call(e, args, path, e.is_module_call() ? paths[e.inputs()[0]] : std::string(), depth)
                      : e.interpret(args);
      for (std::size_t i = 0; i < out.size(); ++i) values[e.output(i)] = std::move(out[i]);
      for (const graph::Node* n : e.inputs())
        if (--uses[n] == 0) values.erase(n);
    }
    std::vector<graph::NodeValue> result;
    for (const graph::Node* n : g.outputs()) result.push_back(values.at(n));
    return result;
  }

 private:
  std::vector<graph::NodeValue> call(const graph::Expr& e, std::span<const graph::NodeValue> args,
                                     const std::string& module, const std::string& callee, std::size_t depth) {
    const std::size_t row = next_++;
    if (first_) rows_.push_back(describe(e, module, callee, depth));
    if (starts.size() <= row) {
      starts.resize(row + 1);
      durations.resize(row + 1);
    }
    const clock::time_point t0 = clock::now();
    std::vector<graph::NodeValue> out;
    const graph::Graph* sub = e.graph();
    if (sub != nullptr) {
      out = run(*sub, *std::get<const Module*>(args[0]), args.subspan(1), callee, depth + 1);
    } else {
      chunks_.current.store(row, std::memory_order_relaxed);  // published to the workers by the region's start
      out = e.interpret(args);
      chunks_.current.store(no_call, std::memory_order_relaxed);
    }
    const clock::time_point t1 = clock::now();
    starts[row] = std::chrono::duration<double>(t0 - origin_).count();
    durations[row] = std::chrono::duration<double>(t1 - t0).count();
    return out;
  }

  static expr_profile describe(const graph::Expr& e, const std::string& module, const std::string& callee,
                               std::size_t depth) {
    expr_profile p;
    p.expr = &e;
    p.module = module;
    p.depth = depth;
    p.cost = e.cost();
    if (e.is_module_call()) {
      const auto* node = static_cast<const graph::ModuleNode*>(e.inputs()[0]);
      const Module* m = node->owner();
      p.name = callee;
      p.type = m != nullptr ? std::string(m->type_name()) : node->module_type();
      p.leaf = e.graph() == nullptr;
    } else {
      p.name = e.output()->name();
      p.type = e.target();
    }
    return p;
  }

  std::vector<expr_profile>& rows_;
  bool first_;
  clock::time_point origin_;
  chunk_log& chunks_;
  std::size_t next_ = 0;
};

}  // namespace profile_detail

/// Profiles `traced` on `inputs`: options.warmup untimed runs, then options.runs timed ones.
inline profile_result profile(const TracedModule& traced, const std::vector<Tensor>& inputs,
                              const profile_options& options = {}) {
  if (options.runs < 1) throw value_error("tmod::profile: runs must be at least 1, got " + std::to_string(options.runs));
  profile_result r;
  r.model = std::string(traced.type_name());
  r.cpu = profile_detail::cpu_name();
  r.threads = get_num_threads();
  r.runs = options.runs;
  std::vector<graph::NodeValue> in;
  for (const Tensor& t : inputs) in.emplace_back(Value(t));
  const graph::Graph& g = traced.graph();
  for (int i = 0; i < options.warmup; ++i) (void)g.run(traced, in);
  std::vector<std::vector<double>> durations;
  std::vector<std::vector<double>> starts;
  std::vector<std::vector<chunk_span>> chunks;
  std::vector<double> totals;
  for (int i = 0; i < options.runs; ++i) {
    const auto t0 = profile_detail::clock::now();
    profile_detail::chunk_log log(t0);
    profile_detail::timed_walk w(r.exprs, i == 0, t0, log);
    (void)w.run(g, traced, in, "", 0);
    totals.push_back(std::chrono::duration<double>(profile_detail::clock::now() - t0).count());
    durations.push_back(std::move(w.durations));
    starts.push_back(std::move(w.starts));
    chunks.push_back(log.take());
  }
  r.forward_seconds = profile_detail::median(totals);
  // The run whose total is the median gives the timeline; each call's time is its own median.
  const auto order = std::min_element(totals.begin(), totals.end(), [&](double a, double b) {
    return std::abs(a - r.forward_seconds) < std::abs(b - r.forward_seconds);
  }) - totals.begin();
  r.timeline_seconds = totals[static_cast<std::size_t>(order)];
  r.chunks = std::move(chunks[static_cast<std::size_t>(order)]);
  if (options.peak) r.peak = cached_machine_peak(r.threads);
  for (std::size_t k = 0; k < r.exprs.size(); ++k) {
    std::vector<double> t;
    for (const auto& d : durations) t.push_back(d[k]);
    r.exprs[k].seconds = profile_detail::median(std::move(t));
    r.exprs[k].start = starts[static_cast<std::size_t>(order)][k];
    r.exprs[k].span = durations[static_cast<std::size_t>(order)][k];
  }
  return r;
}

}  // namespace tracemod

#include <tracemod/profile/report.hpp>  // profile_result::table and save_chrome_trace
