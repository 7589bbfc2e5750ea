// tmod::summary (shape inference, no kernels) and tmod::profile (per-call times, costs, table and
// Chrome trace): ResNet-18's published totals, shapes re-inferred for another input size against a
// trace at that size, and a trace file parsed back and checked against the trace-event schema.
#include "graph_test.hpp"
#include "thread_counts.hpp"

#include <models/resnet.hpp>

#include <tracemod/profile/dot.hpp>
#include <tracemod/profile/profiler.hpp>
#include <tracemod/profile/summary.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tmod_test_graph_profile {

using namespace graph_test;

namespace {

const tmod::summary_row& row_named(const tmod::model_summary& s, const std::string& name) {
  for (const tmod::summary_row& r : s.rows)
    if (r.name == name) return r;
  FAIL("no row " << name);
  return s.rows.front();
}

}  // namespace

TEST_CASE("summary: ResNet-18 at 224x224 has torchvision's parameters and the published multiply-adds") {
  models::ResNet net = models::resnet18();
  net.eval();
  // Shape inference only (the compile-time tracer): no kernel runs at 224x224.
  const tmod::model_summary s = tmod::summary(net, tmod::spec({1, 3, 224, 224}));
  CHECK(s.total_params == 11'689'512);
  CHECK(s.param_bytes == 11'689'512 * 4);
  CHECK(s.total.macs == 1'814'073'344);
  CHECK(s.input_bytes == 3 * 224 * 224 * 4);
  CHECK(s.output == tmod::Shape{1, 1000});
  const tmod::summary_row& conv1 = row_named(s, "conv1");
  CHECK(conv1.type == "Conv2d");
  CHECK(conv1.depth == 0);
  CHECK(conv1.output == tmod::Shape{1, 64, 112, 112});
  CHECK(conv1.params == 64 * 3 * 7 * 7);
  CHECK(conv1.cost.macs == 64LL * 112 * 112 * 3 * 7 * 7);
  const tmod::summary_row& ds = row_named(s, "layer2.0.downsample.0");
  CHECK(ds.depth == 3);
  CHECK(ds.output == tmod::Shape{1, 128, 28, 28});
  CHECK(ds.params == 128 * 64);
  CHECK(row_named(s, "layer4").params == 8'393'728);
  CHECK(row_named(s, "fc").cost.macs == 512 * 1000);
  const std::string table = s.table();
  CHECK(table.find("Total params: 11,689,512") != std::string::npos);
  CHECK(table.find("    layer1.0.conv1 (Conv2d)") != std::string::npos);
  CHECK(table.find("1,814,073,344") != std::string::npos);
}

TEST_CASE("summary: shapes re-inferred for another input size match a trace at that size") {
  models::ResNet net = models::resnet18(10, 8);
  net.eval();
  const tmod::TracedModule small = tmod::trace_module(net, tmod::randn({1, 3, 32, 32}, 2));
  const tmod::TracedModule large = tmod::trace_module(net, tmod::randn({2, 3, 64, 64}, 3));
  const tmod::model_summary s = tmod::summary(small, tmod::spec({2, 3, 64, 64}));
  CHECK(s.total == large.cost());
  CHECK(row_named(s, "layer3.1.conv2").output == tmod::Shape{2, 32, 4, 4});
  // Activations: every call's output; here checked against the summary of the large trace itself.
  CHECK(s.activation_bytes == tmod::summary(large, tmod::spec({2, 3, 64, 64})).activation_bytes);
  // A plain module is traced by the compile-time tracer, without running a kernel.
  const tmod::model_summary m = tmod::summary(net, tmod::spec({2, 3, 64, 64}));
  CHECK(m.total == s.total);
  CHECK(m.total_params == s.total_params);
  CHECK(m.rows.size() == s.rows.size());
  CHECK_THROWS_AS((void)tmod::summary(small, tmod::spec({1, 5, 32, 32})), tmod::shape_error);
}

TEST_CASE("profile: per-call medians, costs, groups, table and a Chrome trace that parses back") {
  Net net;
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 16, 16}, 4);
  const tmod::TracedModule t = tmod::trace_module(net, x);
  const tmod::profile_result p = tmod::profile(t, {x}, {.runs = 3});
  CHECK(p.runs == 3);
  CHECK(p.model == "Net");
  CHECK(!p.cpu.empty());
  // Per Block: conv, bn (builtin modules), relu, add (ops), id (a user module, not a leaf).
  CHECK(p.leaves().size() == 2 * 4);
  CHECK(p.exprs.size() == 2 + 2 * 5);
  double leaf_sum = 0;
  for (const tmod::expr_profile* e : p.leaves()) {
    CHECK(e->seconds > 0);
    CHECK(e->cost == e->expr->cost());
    leaf_sum += e->seconds;
  }
  CHECK(p.leaf_seconds() == doctest::Approx(leaf_sum));
  CHECK(p.leaf_seconds() <= p.forward_seconds * 1.5);
  CHECK(p.coverage() > 0);
  CHECK(p.coverage() <= 1.0);
  const auto ops = p.by_op();
  REQUIRE(ops.size() == 4);
  std::int64_t conv_calls = 0;
  for (const tmod::profile_group& g : ops)
    if (g.key == "Conv2d") {
      conv_calls = g.calls;
      CHECK(g.cost.macs == 2 * 256 * 3 * 27);
      CHECK(g.gflops() == doctest::Approx(static_cast<double>(g.cost.flops) / g.seconds / 1e9));
    }
  CHECK(conv_calls == 2);
  const auto modules = p.by_module();
  REQUIRE(modules.size() == 2);
  CHECK((modules[0].key == "block0" || modules[0].key == "block1"));
  const std::string table = p.table();
  CHECK(table.find(p.cpu) != std::string::npos);
  CHECK(table.find("block0.conv (Conv2d)") != std::string::npos);
  CHECK(table.find("nn.relu") != std::string::npos);

  const auto path = std::filesystem::temp_directory_path() / "tracemod_profile_trace.json";
  p.save_chrome_trace(path.string());
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  REQUIRE(doc.contains("traceEvents"));
  const nlohmann::json& events = doc["traceEvents"];
  std::size_t complete = 0;
  double forward_end = 0;
  for (const nlohmann::json& ev : events) {
    REQUIRE(ev.contains("ph"));
    REQUIRE(ev["pid"].is_number_integer());
    REQUIRE(ev["tid"].is_number_integer());
    if (ev["ph"] != "X") continue;
    ++complete;
    REQUIRE(ev["ts"].is_number());
    REQUIRE(ev["dur"].is_number());
    CHECK(ev["dur"].get<double>() >= 0);
    if (ev["name"] == "forward") forward_end = ev["dur"].get<double>();
  }
  CHECK(complete == p.exprs.size() + 1 + p.chunks.size());
  for (const nlohmann::json& ev : events)
    if (ev["ph"] == "X") CHECK(ev["ts"].get<double>() + ev["dur"].get<double>() <= forward_end * 1.0001 + 1);
#if defined(TRACEMOD_TEST_PYTHON3)
  // What Perfetto and chrome://tracing read: strict JSON, checked by a parser other than ours.
  const std::string json_tool = std::string(TRACEMOD_TEST_PYTHON3) + " -m json.tool " + path.string() + " > /dev/null";
  CHECK(std::system(json_tool.c_str()) == 0);
#endif
  std::filesystem::remove(path);
  CHECK_THROWS_AS((void)tmod::profile(t, {x}, {.runs = 0}), tmod::value_error);
}

TEST_CASE("to_dot(traced, profile): call boxes carry their times and are filled by time share") {
  Net net;
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 16, 16}, 5);
  const tmod::TracedModule t = tmod::trace_module(net, x);
  const tmod::profile_result p = tmod::profile(t, {x}, {.runs = 2});
  const std::string dot = tmod::to_dot(t, p);
  std::size_t filled = 0, timed = 0;
  for (std::size_t at = dot.find("fillcolor"); at != std::string::npos; at = dot.find("fillcolor", at + 1)) ++filled;
  for (std::size_t at = dot.find(" ms ("); at != std::string::npos; at = dot.find(" ms (", at + 1)) ++timed;
  CHECK(filled == p.leaves().size());
  CHECK(timed == p.exprs.size());
  CHECK(dot.find("fillcolor=\"0.000 1.000 1.000\"") != std::string::npos);  // the slowest call
  // The plain drawing is unchanged by the decoration machinery.
  CHECK(t.graph().to_dot().find("fillcolor") == std::string::npos);
  // A profile of another module does not fit.
  AddTwice other;
  const tmod::TracedModule u = tmod::trace_module(other, x);
  CHECK_THROWS_AS((void)tmod::to_dot(u, p), tmod::graph_error);
}

TEST_CASE("profile: kernels split over threads show as worker lanes; rates are compared with the probed peak") {
  Net net;
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 16, 16}, 4);
  const tmod::TracedModule t = tmod::trace_module(net, x);
  const int saved = tmod::get_num_threads();
  tmod::set_num_threads(2);
  tmod::profile_result p;
  {
    const thread_counts::fine_grains split;  // test-sized kernels split too
    p = tmod::profile(t, {x}, {.runs = 2});
  }
  tmod::set_num_threads(saved);
  if (tmod::parallel_backend_available()) {
    REQUIRE(!p.chunks.empty());
    for (const tmod::chunk_span& c : p.chunks) {
      REQUIRE(c.call < p.exprs.size());
      const tmod::expr_profile& call = p.exprs[c.call];
      CHECK(call.leaf);
      CHECK((c.worker == 0 || c.worker == 1));
      // Inside its call's span in the same run (clock reads may differ by a microsecond).
      CHECK(c.start >= call.start - 1e-6);
      CHECK(c.start + c.span <= call.start + call.span + 1e-6);
    }
  }
  REQUIRE(p.peak.has_value());
  CHECK(p.peak->threads == 2);
  CHECK(p.peak->gflops() == doctest::Approx(2 * p.peak->gflops_per_thread));
  CHECK(p.peak->gflops_per_thread > 0);
  CHECK(p.peak->triad_gbps > 0);
  for (const tmod::expr_profile* e : p.leaves())
    CHECK(p.of_peak(*e) == doctest::Approx(std::max(e->gflops() / p.peak->gflops(), e->gbps() / p.peak->triad_gbps)));
  CHECK(p.table().find("% peak") != std::string::npos);
  CHECK(tmod::profile(t, {x}, {.runs = 1, .peak = false}).table().find("% peak") == std::string::npos);
}

TEST_CASE("profile, summary and the Chrome trace refuse bad input and change nothing") {
  Net net;
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 16, 16}, 4);
  const tmod::TracedModule t = tmod::trace_module(net, x);
  const auto values = [](const tmod::Tensor& y) { return std::vector<float>(y.values<float>().begin(), y.values<float>().end()); };
  const std::vector<float> before = values(t(x));
  CHECK_THROWS_AS((void)tmod::profile(t, {tmod::randn({1, 3, 8, 8}, 5)}, {.runs = 1}), tmod::shape_error);
  CHECK_THROWS_AS((void)tmod::profile(t, {x, x}, {.runs = 1}), tmod::graph_error);
  CHECK_THROWS_AS((void)tmod::summary(t, tmod::spec({1, 3, 16, 16}), tmod::spec({1, 3, 16, 16})), tmod::graph_error);
  CHECK(values(t(x)) == before);
  const tmod::profile_result p = tmod::profile(t, {x}, {.runs = 1});
  const std::filesystem::path missing = std::filesystem::temp_directory_path() / "tmod_no_such_dir" / "trace.json";
  CHECK_THROWS_AS(p.save_chrome_trace(missing.string()), tmod::format_error);
  CHECK(!std::filesystem::exists(missing));
  // A write that fails part way (a full disk, injected) leaves the existing file as it was.
  const std::filesystem::path kept = std::filesystem::temp_directory_path() / "tmod_profile_kept_trace.json";
  { std::ofstream(kept) << "previous trace\n"; }
  tmod::io::testing::fail_after_writes = 0;
  CHECK_THROWS_AS(p.save_chrome_trace(kept.string()), tmod::format_error);
  tmod::io::testing::fail_after_writes = -1;
  std::ifstream in(kept);
  std::string line;
  std::getline(in, line);
  CHECK(line == "previous trace");
  std::filesystem::remove(kept);
}

}  // namespace tmod_test_graph_profile
