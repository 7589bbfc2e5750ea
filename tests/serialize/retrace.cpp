// A pretrained traced backbone loaded from a file (its user classes gone) inside a new net with
// pre- and post-processing, traced again, saved and loaded (MegEngine's re-tracing of a loaded
// TracedModule).
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include "retrace_models.hpp"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace tmod_test_serialize_retrace {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

using retrace_models::Backbone;

/// Pre-processing, the loaded backbone, a head.
struct Net : tmod::Module {
  tmod::TracedModule backbone;
  M::Conv2d head{4, 2, 1};
  TM_MODULE(Net, backbone, head)
  explicit Net(tmod::TracedModule b) : backbone(std::move(b)) {}
  auto forward(const auto& x) const { return head(backbone.forward((x - 0.5f) * 2.f)); }
};

tmod::Tensor input() { return tmod::arange(0.f, 192.f).reshape({1, 3, 8, 8}) * 0.01f; }

bool same_bits(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

/// The printed graph without its first line and with every "%<id>:" removed.
std::string body_without_ids(const tmod::graph::Graph& g) {
  const std::string s = tmod::graph::to_string(g);
  std::string out;
  for (std::size_t i = s.find('\n') + 1; i < s.size(); ++i) {
    if (s[i] == '%' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      while (std::isdigit(static_cast<unsigned char>(s[i + 1]))) ++i;
      if (s[i + 1] == ':') ++i;
      continue;
    }
    out += s[i];
  }
  return out;
}

/// Every graph of the hierarchy, printed, in recursive call order.
std::string all_graphs(const tmod::TracedModule& t) {
  std::string s;
  for (const tmod::graph::Graph* g : t.graph().graphs(true)) s += tmod::graph::to_string(*g) + "\n";
  return s;
}

struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const char* name) : path(std::filesystem::temp_directory_path() / name) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST_CASE("a loaded traced backbone inside a new net: traced, run, saved, loaded, flattened, optimized") {
  const tmod::Tensor x = input();
  Backbone b;
  b.eval();
  const TempFile backbone_file("tracemod_retrace_backbone.tmod");
  tmod::save(tmod::trace_module(b, x), backbone_file.path);
  tmod::TracedModule pretrained = tmod::load(backbone_file.path);

  Net net(pretrained);
  net.eval();
  tmod::TracedModule t = tmod::trace_module(net, x);
  const tmod::Tensor eager = net(x);
  CHECK(same_bits(t(x), eager));

  // The nested graph is the loaded backbone's graph, under Net: the same exprs, names and outputs.
  const tmod::graph::Expr* call = t.graph().get_method_by_type("__call__", false).as_list().front();
  REQUIRE(call->graph() != nullptr);
  CHECK(call->graph()->name() == "Net_backbone");
  CHECK(body_without_ids(*call->graph()) == body_without_ids(pretrained.graph()));

  // Saved and loaded: no user class in the loaded tree, the same graphs, the same output bits.
  const TempFile net_file("tracemod_retrace_net.tmod");
  tmod::save(t, net_file.path);
  tmod::TracedModule back = tmod::load(net_file.path);
  for (const auto& entry : back.named_modules()) {  // not a structured binding: clang 14 cannot capture one
    const tmod::Module& m = entry.second;
    CHECK_MESSAGE((m.is_builtin() || dynamic_cast<const tmod::TracedModule*>(&m) != nullptr), entry.first);
  }
  CHECK(all_graphs(back) == all_graphs(t));
  CHECK(same_bits(back(x), eager));

  // Flattened: one graph of builtin calls and functions, the same bits.
  tmod::TracedModule flat = back.flatten();
  CHECK(flat.graph().graphs(true).size() == 1);
  CHECK(flat.graph().get_node_by_name("backbone_stem_conv_out").as_count() == 1);
  CHECK(same_bits(flat(x), eager));

  // Optimized: the BatchNorm folds into the stem's conv.
  tmod::TracedModule fused = tmod::optimize(flat, {"FuseConvBn"});
  CHECK(fused.graph().get_module_by_type<M::BatchNorm2d>().as_count() == 0);
  const tmod::Tensor y = fused(x);
  const auto got = y.values<float>();
  const auto want = eager.values<float>();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-4));
}

}  // namespace tmod_test_serialize_retrace
