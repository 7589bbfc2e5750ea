// Probes of the io entry points (tmod::save, tmod::load, load_npy/save_npy/parse_npy) fed wrong,
// garbage or truncated input, a path that is a directory or a FIFO, a missing folder, a duplicate
// name: each raises a clear format_error naming the path or the part, returns promptly, and leaves
// every file as it was.
#include "robustness/probe.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/io/npy.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include "serialize/edit_file.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

namespace tmod_test_robustness_io_probe {

namespace {

namespace tmod = tracemod;
namespace fs = std::filesystem;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
using json = nlohmann::json;
using probe::expect_error;
using serialize_test::read_file;

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Net : tmod::Module {
  M::Conv2d conv{3, 4, 3, {.padding = 1}};
  M::Linear fc{4, 2};
  TM_MODULE(Net, conv, fc)
  auto forward(const auto& x) const { return fc(F::flatten(F::adaptive_avg_pool2d(conv(x), 1), {.start_axis = 1})); }
};

tmod::TracedModule traced() {
  Net net;
  return tmod::trace_module(net, tmod::randn({1, 3, 8, 8}));
}

/// A folder holding a saved module, a .npy file, a FIFO, a sub-folder and an empty file; snapshot()
/// lists every entry with its bytes, to check that a failing call changed nothing.
struct fixture {
  fs::path dir = fs::temp_directory_path() / ("tracemod_io_probe_" + std::to_string(::getpid()));
  fs::path module = dir / "net.tmod";
  fs::path npy = dir / "x.npy";
  fs::path fifo = dir / "fifo";
  fs::path folder = dir / "folder.tmod";
  fs::path empty = dir / "empty";
  fs::path missing = dir / "no_such_folder" / "net.tmod";

  fixture() {
    fs::remove_all(dir);
    fs::create_directories(folder);
    tmod::save(traced(), module);
    tmod::io::save_npy(npy, tmod::randn({2, 3}));
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    write_file(empty, "");
  }
  ~fixture() { fs::remove_all(dir); }

  [[nodiscard]] std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> s;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      s[e.path().string()] = e.is_regular_file() ? read_file(e.path()) : std::string("(not a file)");
    return s;
  }
};

/// Checks that `call` throws format_error naming `needles` and leaves every file of `f` unchanged.
template <class Call>
void expect_files_kept(const fixture& f, std::string_view what, Call&& call, std::initializer_list<std::string_view> needles) {
  const auto before = f.snapshot();
  expect_error<tmod::format_error>(what, call, needles);
  CHECK_MESSAGE(f.snapshot() == before, what << ": the failing call changed the files");
}

}  // namespace

TEST_CASE("io probe: load of paths that are no module file") {
  const fixture f;
  expect_files_kept(f, "load(missing)", [&] { (void)tmod::load(f.dir / "nothing.tmod"); },
                    {"load: cannot open", "nothing.tmod", "No such file"});
  expect_files_kept(f, "load(directory)", [&] { (void)tmod::load(f.folder); }, {"load: '", "folder.tmod' is a directory"});
  // A FIFO would block the open until a writer comes.
  expect_files_kept(f, "load(fifo)", [&] { (void)tmod::load(f.fifo); }, {"load: '", "fifo' is a FIFO, not a regular file"});
  expect_files_kept(f, "load(empty)", [&] { (void)tmod::load(f.empty); }, {"load: header: the file has 0 bytes"});
  expect_files_kept(f, "load(npy)", [&] { (void)tmod::load(f.npy); }, {"load: header: not a tracemod file (bad magic)"});
  expect_files_kept(f, "load(missing folder)", [&] { (void)tmod::load(f.missing); }, {"load: cannot open", "no_such_folder"});
}

TEST_CASE("io probe: load of garbage, truncated and edited bytes") {
  const fixture f;
  const std::string good = read_file(f.module);
  for (std::size_t n : {std::size_t{0}, std::size_t{7}, std::size_t{63}, std::size_t{64}, good.size() / 2, good.size() - 1})
    expect_error<tmod::format_error>("truncated to " + std::to_string(n), [&] { (void)serialize_test::load_bytes(good.substr(0, n)); },
                                     {"load: "});
  std::string garbage(4096, '\0');
  for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 131 + 7);
  expect_error<tmod::format_error>("garbage", [&] { (void)serialize_test::load_bytes(garbage); }, {"load: header: not a tracemod file"});
  // A description that is valid JSON of the wrong shape.
  expect_error<tmod::format_error>(
      "modules not an array", [&] { (void)serialize_test::load_bytes(serialize_test::with_description(good, [](json& d) { d["modules"] = 3; })); },
      {"field 'modules' must be an array"});
  // Duplicate names: two attributes, two nodes.
  expect_error<tmod::format_error>(
      "duplicate attribute",
      [&] {
        (void)serialize_test::load_bytes(serialize_test::with_description(good, [](json& d) { d["modules"][0]["attrs"][1]["name"] = "conv"; }));
      },
      {"attribute 'conv' is defined twice"});
  expect_error<tmod::format_error>(
      "duplicate node name",
      [&] {
        (void)serialize_test::load_bytes(serialize_test::with_description(good, [](json& d) {
          json& exprs = d["modules"][0]["graphs"][0]["exprs"];
          exprs[1]["out"][0]["name"] = exprs[0]["out"][0]["name"];
        }));
      },
      {"load: module 0 (Net), graph Net, expr %"});
  // The file on disk is unchanged by all of this.
  CHECK(read_file(f.module) == good);
}

TEST_CASE("io probe: save to a directory, a missing folder, a FIFO, a failed stream") {
  const fixture f;
  const tmod::TracedModule m = traced();
  expect_files_kept(f, "save(directory)", [&] { tmod::save(m, f.folder); }, {"save: '", "folder.tmod' is a directory"});
  expect_files_kept(f, "save(missing folder)", [&] { tmod::save(m, f.missing); },
                    {"save: cannot create a file in '", "no_such_folder", "No such file"});
  expect_files_kept(f, "save(fifo)", [&] { tmod::save(m, f.fifo); }, {"save: '", "fifo' exists and is not a regular file"});
  std::ostringstream failed;
  failed.setstate(std::ios::badbit);
  expect_error<tmod::format_error>("save(bad stream)", [&] { tmod::save(m, failed); }, {"save: writing the stream failed"});
  // Saving over a good file succeeds and replaces it whole.
  const tmod::TracedModule other = traced();
  tmod::save(other, f.module);
  CHECK(read_file(f.module) == serialize_test::bytes_of(other));
}

TEST_CASE("io probe: npy entry points") {
  const fixture f;
  const tmod::Tensor t = tmod::randn({2, 2});
  expect_files_kept(f, "load_npy(directory)", [&] { (void)tmod::io::load_npy(f.folder); }, {"folder.tmod", "not a regular file"});
  expect_files_kept(f, "load_npy(fifo)", [&] { (void)tmod::io::load_npy(f.fifo); }, {"fifo", "not a regular file"});
  expect_files_kept(f, "load_npy(missing)", [&] { (void)tmod::io::load_npy(f.missing); }, {"no_such_folder", "file not found"});
  expect_files_kept(f, "load_npy(empty)", [&] { (void)tmod::io::load_npy(f.empty); }, {"empty", "bad magic"});
  expect_files_kept(f, "load_npy(module file)", [&] { (void)tmod::io::load_npy(f.module); }, {"net.tmod", "bad magic"});
  const std::string npy = read_file(f.npy);
  expect_error<tmod::format_error>("parse_npy(truncated)", [&] { (void)tmod::io::parse_npy(std::as_bytes(std::span(npy.data(), npy.size() - 1))); },
                                   {"data size mismatch"});
  expect_files_kept(f, "save_npy(directory)", [&] { tmod::io::save_npy(f.folder, t); }, {"folder.tmod' is a directory"});
  expect_files_kept(f, "save_npy(missing folder)", [&] { tmod::io::save_npy(f.missing, t); }, {"no_such_folder"});
  expect_files_kept(f, "save_npy(fifo)", [&] { tmod::io::save_npy(f.fifo, t); }, {"fifo' exists and is not a regular file"});
  const auto before = f.snapshot();
  expect_error<tmod::value_error>("save_npy(undefined)", [&] { tmod::io::save_npy(f.npy, tmod::Tensor{}); }, {"undefined"});
  CHECK(f.snapshot() == before);
  // An interrupted save_npy leaves the old file.
  tmod::io::testing::fail_after_writes = 0;
  expect_files_kept(f, "save_npy(interrupted)", [&] { tmod::io::save_npy(f.npy, t); }, {"injected failure"});
  tmod::io::testing::fail_after_writes = -1;
  tmod::io::save_npy(f.npy, t);
  CHECK(read_file(f.npy) == tmod::io::to_npy_bytes(t));
}

}  // namespace tmod_test_robustness_io_probe
