// tmod::save / tmod::load: round trips (graphs, names, ids, weights, outputs, bytes) and the
// rejection of corrupted and hostile files with format_error.
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/nn/constant.hpp>
#include <tracemod/traced_module.hpp>

#include <models/resnet.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
using json = nlohmann::json;

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
    return std::make_tuple(head(p), F::reshape(p, {.target_shape = {1, 8}}));
  }
};

std::string bytes_of(const tmod::TracedModule& m) {
  std::ostringstream os;
  tmod::save(m, os);
  return os.str();
}
tmod::TracedModule load_bytes(const std::string& s, const tmod::LoadOptions& o = {}) {
  return tmod::load(std::as_bytes(std::span(s.data(), s.size())), o);
}

std::vector<std::string> describe(const tmod::TracedModule& m) {
  std::vector<std::string> out;
  for (const tmod::graph::Graph* g : m.graph().graphs(true)) {
    out.push_back(tmod::graph::to_string(*g));
    out.push_back(tmod::graph::format_ids(*g));
  }
  for (const tmod::graph::Node* n : m.graph().nodes(true))
    out.push_back(std::to_string(n->id()) + " " + n->name() + " " + n->qualname());
  for (const tmod::graph::Expr* e : m.graph().exprs(true)) {
    std::string id = "%";  // appended, not "%" + string: g++ 12 misfires -Wrestrict on that
    out.push_back(id += std::to_string(e->id()));
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
  for (const auto& [k, t] : sa) CHECK_MESSAGE(same_bits(t, sb.at(k)), k);
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

/// Rebuilds a file with an edited description (fresh checksums), to reach the loader's checks
/// behind the checksums.
std::string with_description(const std::string& file, const std::function<void(json&)>& edit) {
  std::uint64_t json_size = 0, data_offset = 0, data_size = 0;
  std::memcpy(&json_size, file.data() + 32, 8);
  std::memcpy(&data_offset, file.data() + 40, 8);
  std::memcpy(&data_size, file.data() + 48, 8);
  json doc = json::parse(file.substr(64, json_size));
  edit(doc);
  const std::string text = doc.dump();
  tmod::io::detail::header h;
  h.json_size = text.size();
  h.json_crc = tmod::io::crc32c(std::as_bytes(std::span(text.data(), text.size())));
  h.data_offset = (64 + text.size() + 63) / 64 * 64;
  h.data_size = data_size;
  const auto head = h.encode();
  std::string out(reinterpret_cast<const char*>(head.data()), head.size());
  out += text;
  out.resize(h.data_offset, '\0');
  out += file.substr(data_offset);
  return out;
}

std::string load_error(const std::string& file) {
  try {
    (void)load_bytes(file);
  } catch (const tmod::format_error& e) {
    return e.what();
  }
  return "(loaded)";
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
