// The outputs of tmod::profile: profile_result::table() (text) and save_chrome_trace (trace-event
// JSON, written with nlohmann-json).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/io/atomic_file.hpp>
#include <tracemod/profile/format.hpp>
#include <tracemod/profile/profiler.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace tracemod {

inline std::string profile_result::table(std::size_t top) const {
  using profile_detail::fixed;
  using profile_detail::grouped;
  using profile_detail::pad;
  const auto ms = [](double s) { return fixed(s * 1e3, 3); };
  const double leaf_total = leaf_seconds();
  const auto share = [&](double s) { return fixed(leaf_total > 0 ? 100.0 * s / leaf_total : 0.0, 1); };

  std::vector<const expr_profile*> calls = leaves();
  std::stable_sort(calls.begin(), calls.end(), [](const expr_profile* a, const expr_profile* b) { return a->seconds > b->seconds; });
  if (top != 0 && calls.size() > top) calls.resize(top);
  std::vector<std::string> labels;  // the first column of the call rows: the call's path and its type
  for (const expr_profile* e : calls) {
    const std::string where = e->module.empty() ? e->name : e->module + "." + e->name;
    labels.push_back((e->expr->is_module_call() ? e->name : where) + " (" + e->type + ")");
  }
  const std::vector<profile_group> groups = by_op();
  std::size_t width = 24;  // the first column fits its longest entry
  for (const std::string& l : labels) width = std::max(width, l.size() + 2);
  for (const profile_group& g : groups) width = std::max(width, g.key.size() + 2);

  const std::string rule(width + 65 + (peak ? 8 : 0), '-');
  std::string s = "Profile of " + model + " on " + cpu + ", " + std::to_string(threads) + " thread" +
                  (threads == 1 ? "" : "s") + ", median of " + std::to_string(runs) + " run" + (runs == 1 ? "" : "s") +
                  "\nforward " + ms(forward_seconds) + " ms, calls " + ms(leaf_total) +
                  " ms (medians); calls cover " + fixed(100 * coverage(), 1) + " % of the median run\n";
  if (peak)
    s += "peak (probed): " + fixed(peak->gflops(), 1) + " GFLOP/s FMA (" + fixed(peak->gflops_per_thread, 1) +
         " per thread), " + fixed(peak->triad_gbps, 1) + " GB/s triad; % peak = the larger share of the two\n";
  const auto header = [&](const std::string& first) {
    return rule + "\n" + pad(first, width) + pad("calls", 7, true) + pad("time ms", 11, true) + pad("%", 7, true) +
           pad("GFLOP", 10, true) + pad("MB", 11, true) + pad("GFLOP/s", 10, true) + pad("GB/s", 9, true) +
           (peak ? pad("% peak", 8, true) : std::string()) + "\n" + rule + "\n";
  };
  const auto row = [&](const std::string& first, std::int64_t n, double secs, const functional::op_cost& c) {
    const double gf = secs > 0 ? static_cast<double>(c.flops) / secs / 1e9 : 0;
    const double gb = secs > 0 ? static_cast<double>(c.bytes()) / secs / 1e9 : 0;
    return pad(first, width) + pad(grouped(n), 7, true) + pad(ms(secs), 11, true) + pad(share(secs), 7, true) +
           pad(fixed(static_cast<double>(c.flops) / 1e9, 3), 10, true) +
           pad(fixed(static_cast<double>(c.bytes()) / 1e6, 2), 11, true) + pad(fixed(gf, 1), 10, true) +
           pad(fixed(gb, 1), 9, true) + (peak ? pad(fixed(100 * peak->fraction(gf, gb), 1), 8, true) : std::string()) +
           "\n";
  };
  s += header("call (type)");
  for (std::size_t i = 0; i < calls.size(); ++i) s += row(labels[i], 1, calls[i]->seconds, calls[i]->cost);
  s += header("op type");
  for (const profile_group& g : groups) s += row(g.key, g.calls, g.seconds, g.cost);
  return s + rule + "\n";
}

inline void profile_result::save_chrome_trace(const std::string& path) const {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0},
                    {"args", {{"name", "tracemod " + model + " (" + cpu + ")"}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "calls"}}}});
  events.push_back({{"name", "forward"}, {"cat", "forward"}, {"ph", "X"}, {"pid", 1}, {"tid", 0}, {"ts", 0.0},
                    {"dur", timeline_seconds * 1e6}});
  int workers = 0;
  for (const chunk_span& c : chunks) {
    workers = std::max(workers, c.worker + 1);
    const std::string name = c.call < exprs.size() ? exprs[c.call].name : "kernel";
    events.push_back({{"name", name}, {"cat", "chunk"}, {"ph", "X"}, {"pid", 1}, {"tid", 1 + c.worker},
                      {"ts", c.start * 1e6}, {"dur", c.span * 1e6}});
  }
  for (int w = 0; w < workers; ++w)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1 + w},
                      {"args", {{"name", "worker " + std::to_string(w)}}}});
  for (const expr_profile& e : exprs) {
    const std::string name = e.expr->is_module_call() || e.module.empty() ? e.name : e.module + "." + e.name;
    events.push_back({{"name", name},
                      {"cat", e.type},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", 0},
                      {"ts", e.start * 1e6},
                      {"dur", e.span * 1e6},
                      {"args", {{"flops", e.cost.flops}, {"macs", e.cost.macs}, {"bytes", e.cost.bytes()}, {"median_us", e.seconds * 1e6},
                                {"gflops_per_s", e.gflops()}, {"gb_per_s", e.gbps()}, {"of_peak", of_peak(e)}}}});
  }
  const nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  const std::string text = doc.dump(1) + "\n";
  // As tmod::save: a failed write leaves an existing file as it was.
  io::write_file_atomically(path, "save_chrome_trace", [&](io::AtomicFile& f) { f.write(text.data(), text.size()); });
}

}  // namespace tracemod
