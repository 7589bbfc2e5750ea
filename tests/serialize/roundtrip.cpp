// tmod::save / tmod::load: round trips (graphs, names, ids, weights, outputs, bytes) and the
// rejection of corrupted and hostile files with format_error.
#include <tracemod/graph/register_builtin.hpp>
#include <tracemod/graph/wrap.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/traced_module/surgery.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/nn/constant.hpp>
#include <tracemod/traced_module.hpp>

#include <models/resnet.hpp>

#include <doctest/doctest.h>

#include "graph/opaque_scale.hpp"
#include "serialize/edit_file.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

namespace tmod_test_serialize_roundtrip {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
using json = nlohmann::json;
using serialize_test::bytes_of;
using serialize_test::load_bytes;
using serialize_test::load_error;
using serialize_test::with_description;

/// A user module inside a user module, ops with params, a constant, a tuple output, several builtins.
struct Head : tmod::Module {
  M::Linear fc{8, 3};
  TM_MODULE(Head, fc)
  auto forward(const auto& x) const { return fc(F::flatten(x, {.start_axis = 1})); }
};
struct Net : tmod::Module {
  M::Conv2d conv{3, 8, 3, {.stride = 2, .padding = 1}};
  M::BatchNorm2d bn{8};
  M::MaxPool2d pool{2};
  M::AdaptiveAvgPool2d gap{1};
  Head head;
  tmod::Parameter scale{tmod::tensor({0.5f})};
  TM_MODULE(Net, conv, bn, pool, gap, head, scale)
  auto forward(const auto& x) const {
    auto y = F::relu(bn(conv(x))) * scale + tmod::constant({0.25f});
    auto p = gap(pool(y));
    return std::make_tuple(head(p), F::reshape(p, {1, 8}));
  }
};

/// Wrapped and registered here, as a loading program declares them.
const auto saved_relu6 = tmod::wrap("saved_relu6", [](const auto& x) { return F::minimum(F::relu(x), 6.f); });

/// A user module made builtin at run time (once per executable): opaque in tracing and surgery,
/// saved as (type, config, tensors) and rebuilt from the registry.
using opaque_test::OpaqueScale;
using opaque_test::UsesOpaque;
const bool opaque_scale_registered = (tmod::register_as_builtin<OpaqueScale>(), true);

/// A conv clipped by the builtin ReLU6.
struct Clipped : tmod::Module {
  M::Conv2d conv{3, 4, 3, {.padding = 1}};
  M::ReLU6 act;
  TM_MODULE(Clipped, conv, act)
  auto forward(const auto& x) const { return act(conv(x)); }
};

/// A user module attached by surgery (traced into a graph of its own there).
struct Halve : tmod::Module {
  TM_MODULE(Halve)
  auto forward(const auto& x) const { return x * 0.5f; }
};

std::vector<std::string> describe(const tmod::TracedModule& m) {
  std::vector<std::string> out;
  for (const tmod::graph::Graph* g : m.graph().graphs(true)) {
    out.push_back(tmod::graph::to_string(*g));
    out.push_back(tmod::graph::format_ids(*g));
  }
  for (const tmod::graph::Node* n : m.graph().nodes(true))
    out.push_back(std::to_string(n->id()) + " " + n->name() + " " + n->qualname());
  for (const tmod::graph::Expr* e : m.graph().exprs(true)) {
    std::string id = "%";  // appended piecewise: g++ 12 misreports -Wrestrict on "literal" + std::string&&
    id += std::to_string(e->id());
    out.push_back(std::move(id));
  }
  out.push_back(std::to_string(m.total_ids().first) + "," + std::to_string(m.total_ids().second));
  return out;
}

bool same_bits(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.dtype() == tmod::DType::int32 ? static_cast<const void*>(a.data<std::int32_t>()) : a.data<float>(),
                     b.dtype() == tmod::DType::int32 ? static_cast<const void*>(b.data<std::int32_t>()) : b.data<float>(),
                     a.nbytes()) == 0;
}

void check_same_state(const tmod::Module& a, const tmod::Module& b) {
  const tmod::StateDict sa = a.state_dict(), sb = b.state_dict();
  REQUIRE(sa.keys() == sb.keys());
  for (const auto& entry : sa) CHECK_MESSAGE(same_bits(entry.second, sb.at(entry.first)), entry.first);
}

void check_same_outputs(const tmod::Value& a, const tmod::Value& b) {
  REQUIRE(a.kind() == b.kind());
  if (a.is_tensor()) {
    CHECK(same_bits(a.tensor(), b.tensor()));
    return;
  }
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) check_same_outputs(a[i], b[i]);
}

/// Everything that must survive save -> load: printed graphs, ids, names, qualnames, state, outputs
/// (bit-identical), and save -> load -> save gives the same bytes.
template <class... X>
tmod::TracedModule check_round_trip(tmod::TracedModule& t, const X&... x) {
  const std::string file = bytes_of(t);
  tmod::TracedModule back = load_bytes(file);
  CHECK(describe(back) == describe(t));
  check_same_state(back, t);
  check_same_outputs(back(x...), t(x...));
  CHECK(bytes_of(back) == file);
  return back;
}

tmod::TracedModule traced_net(const tmod::Tensor& x) {
  Net net;
  net.eval();
  return tmod::trace_module(net, x);
}

}  // namespace

TEST_CASE("crc32c: the check value of the Castagnoli polynomial and incremental use") {
  const std::string s = "123456789";
  CHECK(tmod::io::crc32c(std::as_bytes(std::span(s.data(), s.size()))) == 0xE3069283u);  // RFC 3720's check
  const auto all = std::as_bytes(std::span(s.data(), s.size()));
  CHECK(tmod::io::crc32c(all.subspan(4), tmod::io::crc32c(all.first(4))) == 0xE3069283u);
}

TEST_CASE("crc32c: the hardware and portable paths agree, on RFC 3720's vectors and on every length") {
  const auto crc_of = [](const std::vector<unsigned char>& v, auto&& f) {
    return f(std::as_bytes(std::span(v.data(), v.size())), 0u);
  };
  const auto portable = [](std::span<const std::byte> b, std::uint32_t c) { return tmod::io::crc32c_portable(b, c); };
  const auto dispatched = [](std::span<const std::byte> b, std::uint32_t c) { return tmod::io::crc32c(b, c); };
  // RFC 3720, appendix B.4: 32 zeros, 32 0xFF bytes, 0..31, 31..0.
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[static_cast<std::size_t>(i)] = static_cast<unsigned char>(i);
    down[static_cast<std::size_t>(i)] = static_cast<unsigned char>(31 - i);
  }
  for (const auto& f : {+portable, +dispatched}) {
    CHECK(crc_of(zeros, f) == 0x8A9136AAu);
    CHECK(crc_of(ones, f) == 0x62A8AB43u);
    CHECK(crc_of(up, f) == 0x46DD794Eu);
    CHECK(crc_of(down, f) == 0x113FDB5Cu);
  }
  // Lengths around the hardware path's block sizes (3 x 256, 3 x 8192), odd offsets, and a split
  // anywhere: the dispatched CRC (three streams when the CPU has SSE4.2) equals the portable one.
  std::vector<unsigned char> data(3 * 8192 * 2 + 3 * 256 + 77);
  std::uint32_t v = 12345;
  for (auto& b : data) b = static_cast<unsigned char>((v = v * 1103515245u + 12345u) >> 24);
  const auto bytes = std::as_bytes(std::span(data.data(), data.size()));
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{767},
                              std::size_t{768}, std::size_t{769}, std::size_t{3 * 8192 - 1}, std::size_t{3 * 8192},
                              std::size_t{3 * 8192 + 3 * 256 + 9}, data.size() - 3}) {
    CAPTURE(n);
    const auto part = bytes.subspan(3, n);
    const std::uint32_t expected = tmod::io::crc32c_portable(part);
    CHECK(tmod::io::crc32c(part) == expected);
    CHECK(tmod::io::crc32c(part.subspan(n / 3), tmod::io::crc32c(part.first(n / 3))) == expected);
  }
}

TEST_CASE("crc32c_parallel: the value of the portable CRC at 1 to 4 threads, around the piece size") {
  constexpr std::size_t piece = std::size_t{1} << 20;  // detail::crc32c_piece, restated independently
  std::vector<unsigned char> data(4 * piece + 4096);
  std::uint32_t v = 777;
  for (auto& b : data) b = static_cast<unsigned char>((v = v * 1103515245u + 12345u) >> 24);
  const auto bytes = std::as_bytes(std::span(data.data(), data.size()));
  const int threads_before = tmod::get_num_threads();
  for (const std::size_t n : {std::size_t{0}, piece - 1, 2 * piece - 1, 2 * piece, 2 * piece + 1, 3 * piece + 4093,
                              data.size() - 3}) {
    const auto part = bytes.subspan(3, n);
    const std::uint32_t expected = tmod::io::crc32c_portable(part);
    for (const int threads : {1, 2, 3, 4}) {
      CAPTURE(n);
      CAPTURE(threads);
      tmod::set_num_threads(threads);
      CHECK(tmod::io::crc32c_parallel(part) == expected);
    }
  }
  tmod::set_num_threads(threads_before);
}

TEST_CASE("save/load: a nested module round-trips graphs, names, ids, weights and outputs") {
  const tmod::Tensor x = tmod::randn({1, 3, 8, 8});
  tmod::TracedModule t = traced_net(x);
  const std::string file = bytes_of(t);
  tmod::TracedModule back = load_bytes(file);
  CHECK(describe(back) == describe(t));
  check_same_state(back, t);
  check_same_outputs(back(x), t(x));
  CHECK(bytes_of(back) == file);  // save -> load -> save is byte-identical
  CHECK(back.is_top());
  CHECK(back.graph().top_graph() == nullptr);
}

TEST_CASE("save/load: ResNet-18 through a mapped file, weights used in place and copy-on-write") {
  models::ResNet net(10, 16);
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 32, 32});
  tmod::TracedModule t = tmod::trace_module(net, x);
  const auto path = std::filesystem::temp_directory_path() / "tracemod_roundtrip_resnet.tmod";
  tmod::save(t, path);
  tmod::TracedModule back = tmod::load(path);
  CHECK(describe(back) == describe(t));
  check_same_state(back, t);
  check_same_outputs(back(x), t(x));
  CHECK(bytes_of(back) == bytes_of(t));
  // Writing a loaded weight changes the module, not the file.
  const std::string before = bytes_of(tmod::load(path));
  back.state_dict().at("conv1.weight").data<float>()[0] += 1.0f;
  CHECK(bytes_of(tmod::load(path)) == before);
  // Without tensor checksums it loads the same module.
  check_same_state(tmod::load(path, {.verify_tensor_checksums = false}), t);
  std::filesystem::remove(path);
}

TEST_CASE("save/load: an optimized ResNet's read-only weights stay read-only, and its output bits the same") {
  models::ResNet net(10, 64);
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 56, 56});
  const tmod::TracedModule fast =
      tmod::optimize(tmod::trace_module(net, x), {"FuseConvBn", "FuseAddMul", "BackwardFoldScale", "FuseConvEpilogue"});
  const std::string file = bytes_of(fast);
  REQUIRE(file.find("\"read_only\":true") != std::string::npos);  // the fused convolutions' kept weights
  const tmod::TracedModule back = load_bytes(file);
  check_same_outputs(back(x), fast(x));  // the same kernel paths (Winograd on prepared filters) as saved
  CHECK(bytes_of(back) == file);          // the flags survive save -> load -> save
}

TEST_CASE("load: a tensor's read_only flag must be a boolean") {
  const std::string file = bytes_of(traced_net(tmod::randn({1, 3, 8, 8})));
  CHECK(load_error(with_description(file, [](json& d) { d["tensors"][0]["read_only"] = "yes"; }))
            .find("tensor 0: \"read_only\" must be true or false") != std::string::npos);
  CHECK(load_error(with_description(file, [](json& d) { d["tensors"][0]["read_only"] = false; })) == "(loaded)");
}

TEST_CASE("save/load: a renamed node round-trips") {
  const tmod::Tensor x = tmod::randn({1, 3, 8, 8});
  tmod::TracedModule t = traced_net(x);
  t.graph().outputs()[1]->set_name("pooled");
  tmod::TracedModule back = load_bytes(bytes_of(t));
  CHECK(describe(back) == describe(t));
  check_same_outputs(back(x), t(x));
}

TEST_CASE("load: corrupted and truncated files raise format_error naming the part") {
  const tmod::Tensor x = tmod::randn({1, 3, 8, 8});
  const std::string file = bytes_of(traced_net(x));
  std::uint64_t data_offset = 0;
  std::memcpy(&data_offset, file.data() + 40, 8);
  const auto flipped = [&](std::size_t at) {
    std::string f = file;
    f[at] = static_cast<char>(f[at] ^ 0x10);
    return f;
  };
  CHECK(load_error(flipped(1)).find("bad magic") != std::string::npos);
  CHECK(load_error(flipped(33)).find("header checksum") != std::string::npos);
  CHECK(load_error(flipped(100)).find("description: checksum") != std::string::npos);
  const std::string bad_weight = flipped(data_offset + 1);
  CHECK(load_error(bad_weight).find("blob 0: checksum") != std::string::npos);
  CHECK_NOTHROW((void)load_bytes(bad_weight, {.verify_tensor_checksums = false}));
  for (std::size_t n : {std::size_t{0}, std::size_t{10}, std::size_t{64}, std::size_t{200}, data_offset, file.size() - 1})
    CHECK_MESSAGE(load_error(file.substr(0, n)).find("load: ") == 0, n);
}

TEST_CASE("load: hostile descriptions raise format_error naming what and where") {
  const tmod::Tensor x = tmod::randn({1, 3, 8, 8});
  const std::string file = bytes_of(traced_net(x));
  const auto error_of = [&](const std::function<void(json&)>& edit) { return load_error(with_description(file, edit)); };
  const auto first_op = [](json& d) -> json& {
    for (json& e : d["modules"][0]["graphs"][0]["exprs"])
      if (e["kind"] == "op") return e;
    throw std::logic_error("no op");
  };
  CHECK(error_of([](json&) {}) == "(loaded)");  // the helper itself keeps the file valid
  CHECK(error_of([&](json& d) { first_op(d)["target"] = "nn.no_such_op"; }).find("unknown op 'nn.no_such_op'") !=
        std::string::npos);
  CHECK(error_of([&](json& d) { first_op(d)["args"][0] = json{{"node", 9999}}; }).find("node %9999 is used before it is defined") !=
        std::string::npos);
  CHECK(error_of([&](json& d) { first_op(d)["out"][0]["shape"] = json::array({1, 2}); }).find("but its expr gives") !=
        std::string::npos);
  CHECK(error_of([](json& d) { d["tensors"][0]["shape"] = json::array({1LL << 40, 1LL << 40}); }).find("overflows") !=
        std::string::npos);
  CHECK(error_of([](json& d) { d["tensors"][0]["shape"] = json::array({1 << 20}); }).find("needs more bytes than blob") !=
        std::string::npos);
  CHECK(error_of([](json& d) { d["blobs"][0]["offset"] = 1LL << 50; }).find("past the end") != std::string::npos);
  CHECK(error_of([](json& d) { d["modules"][5]["attrs"] = json::array({json{{"name", "loop"}, {"module", 0}}}); })
            .find("a cycle or a second parent") != std::string::npos);
  CHECK(error_of([](json& d) { d["modules"][0]["kind"] = "pickle"; }).find("unknown module kind") != std::string::npos);
  CHECK(error_of([](json& d) {
          json v = json{{"tuple", json::array()}};
          for (int i = 0; i < 200; ++i) v = json{{"tuple", json::array({v})}};
          d["modules"][1]["config"] = v;
        }).find("nest deeper") != std::string::npos);
  CHECK(error_of([](json& d) { d["modules"].erase(3); }).find("load: ") == 0);
  CHECK(error_of([](json& d) { d.erase("modules"); }).find("missing field 'modules'") != std::string::npos);
}

TEST_CASE("save/load: a module edited by surgery round-trips (wrapped op, traced user module, compile)") {
  const tmod::Tensor x = tmod::randn({1, 3, 8, 8}) * 10.f;
  tmod::TracedModule t = traced_net(x);
  t.setattr("halve", Halve{});
  tmod::graph::Graph& g = t.graph();
  tmod::graph::Expr* relu = g.get_function_by_type(F::relu, false).as_list().front();
  tmod::graph::Node* r6 = nullptr;
  {
    auto scope = tmod::graph::insert_exprs(g, relu);
    r6 = t.getattr("halve").as<Halve>()(saved_relu6(tmod::Sym(relu->inputs().front()))).node();
  }
  tmod::graph::replace_node(g, {{relu->output(), r6}});
  g.compile();
  const std::string printed = tmod::graph::to_string(g);
  REQUIRE(printed.find("saved_relu6_out = saved_relu6(bn_out, )") != std::string::npos);
  REQUIRE(printed.find("halve_out = halve(saved_relu6_out, )") != std::string::npos);
  // compile() freed relu_out: the name is not saved as taken (the file holds the nodes' names only;
  // load claims each as it rebuilds the node).
  REQUIRE(!g.names().taken("relu_out"));
  tmod::TracedModule back = check_round_trip(t, x);
  CHECK(!back.graph().names().taken("relu_out"));
  CHECK(back.graph().names().taken("saved_relu6_out"));
  CHECK(back.graph().get_function_by_type("saved_relu6").as_count() == 1);
  CHECK(dynamic_cast<const tmod::TracedModule*>(&back.getattr("halve").module()) != nullptr);
  // The wrapped op reaches to_dot through the registry, before and after the round trip.
  CHECK(g.to_dot().find("saved_relu6") != std::string::npos);
  CHECK(back.graph().to_dot() == g.to_dot());
}

TEST_CASE("save/load: a flattened module round-trips") {
  const tmod::Tensor x = tmod::randn({1, 3, 8, 8});
  tmod::TracedModule t = traced_net(x);
  tmod::TracedModule flat = t.flatten();
  REQUIRE(flat.graph().graphs(true).size() == 1);
  tmod::TracedModule back = check_round_trip(flat, x);
  CHECK(back.graph().graphs(true).size() == 1);
  check_same_outputs(back(x), t(x));
}

TEST_CASE("save/load: a user module made builtin with register_as_builtin comes back as itself") {
  REQUIRE(opaque_scale_registered);
  UsesOpaque m;
  const tmod::Tensor x = tmod::randn({1, 3, 6, 6});
  tmod::TracedModule t = tmod::trace_module(m, x);
  tmod::TracedModule back = check_round_trip(t, x);
  const auto* op = dynamic_cast<const OpaqueScale*>(&back.getattr("op").module());
  REQUIRE(op != nullptr);
  CHECK(same_bits(op->s, m.op.s));
  CHECK(same_bits(back(x).tensor(), F::neg(m.conv(x)) * 3.f));
}

TEST_CASE("save/load: a graph calling M::ReLU6 round-trips") {
  Clipped m;
  const tmod::Tensor x = tmod::randn({1, 3, 6, 6}) * 10.f;
  tmod::TracedModule t = tmod::trace_module(m, x);
  tmod::TracedModule back = check_round_trip(t, x);
  CHECK(back.getattr("act").module().type_name() == "ReLU6");
  const tmod::Tensor y = back(x).tensor();
  const tmod::Tensor z = m.conv(x);
  const auto got = y.values<float>(), pre = z.values<float>();
  REQUIRE(got.size() == pre.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == std::min(std::max(pre[i], 0.f), 6.f));
}

TEST_CASE("load: a builtin's tensor whose shape disagrees with its config is a format_error") {
  const tmod::Tensor x = tmod::randn({1, 3, 8, 8});
  const std::string file = bytes_of(traced_net(x));
  const auto set_config = [](json& d, const std::string& type, const std::string& key, const json& v) {
    for (json& m : d["modules"])
      if (m["type"] == type)
        for (json& kv : m["config"]["dict"])
          if (kv[0] == key) kv[1] = v;
  };
  // Net's conv: 3 -> 8 channels, 3x3: its weight is (8, 3, 3, 3).
  const std::string conv = load_error(with_description(file, [&](json& d) { set_config(d, "Conv2d", "out_channels", 16); }));
  CHECK(conv.find("module 'conv' (Conv2d): tensor 'weight' has shape " + tmod::Shape{8, 3, 3, 3}.to_string() +
                  ", but its config gives " + tmod::Shape{16, 3, 3, 3}.to_string()) != std::string::npos);
  const std::string in = load_error(with_description(file, [&](json& d) { set_config(d, "Conv2d", "in_channels", 6); }));
  CHECK(in.find("module 'conv' (Conv2d): tensor 'weight' has shape " + tmod::Shape{8, 3, 3, 3}.to_string() +
                ", but its config gives " + tmod::Shape{8, 6, 3, 3}.to_string()) != std::string::npos);
  // A nested module is named by its path.
  const std::string fc = load_error(with_description(file, [&](json& d) { set_config(d, "Linear", "in_features", 9); }));
  CHECK(fc.find("module 'head.fc' (Linear): tensor 'weight' has shape " + tmod::Shape{3, 8}.to_string() +
                ", but its config gives " + tmod::Shape{3, 9}.to_string()) != std::string::npos);
  const std::string bn = load_error(with_description(file, [&](json& d) { set_config(d, "BatchNorm2d", "num_features", 4); }));
  CHECK(bn.find("module 'bn' (BatchNorm2d): tensor 'weight'") != std::string::npos);
}

}  // namespace tmod_test_serialize_roundtrip
