// tmod::save to a path replaces the file atomically: saving over the file a module was loaded from
// works (the module's weights are mapped from it), and a save that fails, at any write, leaves the
// previous file byte-identical and no temporary file behind.
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/traced_module.hpp>

#include <models/resnet.hpp>

#include <doctest/doctest.h>

#include "serialize/edit_file.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace tmod_test_serialize_atomic_save {

namespace {

namespace tmod = tracemod;
namespace fs = std::filesystem;
namespace M = tracemod::nn;
using serialize_test::bytes_of;
using serialize_test::read_file;

/// A fresh empty folder, removed with everything in it at the end of the scope.
struct temp_folder {
  fs::path path;
  explicit temp_folder(const std::string& tag)
      : path(fs::temp_directory_path() / ("tracemod_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_folder() { fs::remove_all(path); }
  [[nodiscard]] std::vector<std::string> entries() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(path)) v.push_back(e.path().filename().string());
    return v;
  }
};

tmod::TracedModule small_resnet(int width) {
  models::ResNet net(10, width);
  net.eval();
  return tmod::trace_module(net, tmod::randn({1, 3, 16, 16}));
}

/// A user module that is neither traced nor builtin: a traced module holding one cannot be saved.
struct Plain : tmod::Module {
  M::ReLU relu;
  TM_MODULE(Plain, relu)
  auto forward(const auto& x) const { return relu(x); }
};

}  // namespace

TEST_CASE("save: over the file the module was loaded from") {
  const temp_folder folder("save_over_loaded");
  const fs::path path = folder.path / "net.tmod";
  tmod::save(small_resnet(4), path);
  const tmod::Tensor x = tmod::randn({1, 3, 16, 16});
  tmod::TracedModule m = tmod::load(path);
  const std::string before = bytes_of(m);
  const tmod::Tensor y = m(x).tensor();
  tmod::save(m, path);
  CHECK(read_file(path) == before);
  // The loaded module still reads its weights from the old file's mapping.
  CHECK(std::memcmp(m(x).tensor().data<float>(), y.data<float>(), y.nbytes()) == 0);
  CHECK(bytes_of(tmod::load(path)) == before);
  CHECK(folder.entries() == std::vector<std::string>{"net.tmod"});
}

TEST_CASE("save: a module that cannot be saved leaves the existing file as it was") {
  const temp_folder folder("save_unsaveable");
  const fs::path path = folder.path / "net.tmod";
  tmod::save(small_resnet(2), path);
  const std::string before = read_file(path);
  tmod::TracedModule bad = small_resnet(2);
  bad.setattr("plain", Plain{});
  CHECK_THROWS_WITH_AS(tmod::save(bad, path), doctest::Contains("neither a TracedModule nor a registered builtin"),
                       tmod::format_error);
  CHECK(read_file(path) == before);
  CHECK(folder.entries() == std::vector<std::string>{"net.tmod"});
}

TEST_CASE("save: a failure at any write leaves the previous file byte-identical and no temporary file") {
  const temp_folder folder("save_interrupted");
  const fs::path path = folder.path / "net.tmod";
  tmod::save(small_resnet(2), path);
  ::chmod(path.c_str(), 0640);
  const std::string before = read_file(path);
  const tmod::TracedModule next = small_resnet(4);
  const std::string expected = bytes_of(next);
  std::int64_t failures = 0;
  for (std::int64_t n = 0;; ++n) {
    CAPTURE(n);
    tmod::io::testing::fail_after_writes = n;
    try {
      tmod::save(next, path);
    } catch (const tmod::format_error& e) {
      CHECK(std::string(e.what()).find("save: writing '" + path.string() + "' failed") == 0);
      CHECK(read_file(path) == before);
      CHECK(folder.entries() == std::vector<std::string>{"net.tmod"});
      ++failures;
      continue;
    }
    break;
  }
  tmod::io::testing::fail_after_writes = -1;
  // Every write was interrupted once: the header, the description, its padding, each blob and pad.
  CHECK(failures > 20);
  CHECK(read_file(path) == expected);
  CHECK(folder.entries() == std::vector<std::string>{"net.tmod"});
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);  // the replaced file's permissions are kept
}

}  // namespace tmod_test_serialize_atomic_save
