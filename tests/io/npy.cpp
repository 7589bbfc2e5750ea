// .npy reading and writing: round trips, numpy's own files, every malformation; and the golden
// data helpers of tests/golden.hpp that read such files.
#include <tracemod/core/factories.hpp>
#include <tracemod/io/npy.hpp>

#include "golden.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <span>
#include <set>
#include <string>
#include <vector>

namespace tmod_test_io_npy {

namespace tmod = tracemod;
namespace fs = std::filesystem;

namespace {

fs::path npy_sample(const std::string& name) { return golden::data_dir() / "npy" / (name + ".npy"); }

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE_MESSAGE(in, "cannot open " << p.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

tmod::Tensor parse(std::string_view bytes) { return tmod::io::parse_npy(std::as_bytes(std::span(bytes))); }

/// A .npy file assembled by hand (independently of the writer): magic, version, header length,
/// header text, data.
std::string assemble(std::string_view header, std::string_view data, unsigned major = 1) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t n = header.size();
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  out += header;
  out += data;
  return out;
}

std::string floats(std::initializer_list<float> values) {
  std::string s(values.size() * sizeof(float), '\0');
  std::memcpy(s.data(), std::data(values), s.size());
  return s;
}

const std::string header_2x3 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";
const std::string data_2x3 = floats({-0.5f, -0.25f, 0.f, 0.25f, 0.5f, 0.75f});

/// Parsing `bytes` throws format_error whose message contains every fragment.
void check_rejected(std::string_view bytes, std::initializer_list<std::string_view> fragments) {
  try {
    (void)parse(bytes);
    FAIL_CHECK("accepted a malformed file; expected an error mentioning '" << *fragments.begin() << "'");
  } catch (const tmod::format_error& e) {
    const std::string what = e.what();
    for (std::string_view f : fragments) CHECK_MESSAGE(what.find(f) != std::string::npos, "'" << what << "' lacks '" << f << "'");
  }
}

void check_values(const tmod::Tensor& t, const tmod::Shape& shape, const std::vector<float>& expected) {
  REQUIRE(t.dtype() == tmod::DType::float32);
  REQUIRE(t.shape() == shape);
  const std::vector<float> got(t.values<float>().begin(), t.values<float>().end());
  CHECK(got == expected);
}

void check_values(const tmod::Tensor& t, const tmod::Shape& shape, const std::vector<std::int32_t>& expected) {
  REQUIRE(t.dtype() == tmod::DType::int32);
  REQUIRE(t.shape() == shape);
  const std::vector<std::int32_t> got(t.values<std::int32_t>().begin(), t.values<std::int32_t>().end());
  CHECK(got == expected);
}

}  // namespace

TEST_CASE("npy: the writer's bytes are numpy.save's bytes") {
  const auto arange = [](std::int64_t n, float offset) {
    std::vector<float> v;
    for (std::int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>(i) + offset);
    return v;
  };
  const std::vector<float> v2x3{-0.5f, -0.25f, 0.f, 0.25f, 0.5f, 0.75f};
  const std::vector<std::int32_t> i5{-2, -1, 0, 1, 2147483647};
  std::vector<std::int32_t> i16(16);
  for (std::int32_t i = 0; i < 16; ++i) i16[static_cast<std::size_t>(i)] = i;
  const std::vector<float> f17 = arange(17, -8.f);

  struct Sample {
    std::string name;
    tmod::Tensor tensor;
  };
  const std::vector<Sample> samples{
      {"f4_2x3", tmod::tensor(std::span<const float>(v2x3), {2, 3})},
      {"i4_5", tmod::tensor(std::span<const std::int32_t>(i5), {5})},
      {"f4_scalar", tmod::scalar_tensor(3.5f)},
      {"f4_0x3", tmod::zeros({0, 3})},
      {"f4_17", tmod::tensor(std::span<const float>(f17), {17})},
      {"i4_1x2x1x2x1x2x1x2", tmod::tensor(std::span<const std::int32_t>(i16), {1, 2, 1, 2, 1, 2, 1, 2})},
      {"f4_100000x0", tmod::zeros({100000, 0})},
  };
  for (const Sample& s : samples) {
    CAPTURE(s.name);
    const std::string numpy_bytes = read_file(npy_sample(s.name));
    CHECK(tmod::io::to_npy_bytes(s.tensor) == numpy_bytes);

    const tmod::Tensor read = tmod::io::load_npy(npy_sample(s.name));
    CHECK(golden::compare(read, s.tensor, 0.0, 0.0).ok);
  }
}

// numpy refuses to create arrays of these shapes (the product of the non-zero extents is too
// large), so its rules are applied by hand: the dict, 21 - digits(shape[0]) spaces of room to
// grow, then spaces and '\n' up to a multiple of 64 bytes, a whole 64 more when already aligned.
TEST_CASE("npy: header padding at the boundaries numpy cannot be asked about") {
  const auto header_of = [](const tmod::Shape& shape) {
    const std::string bytes = tmod::io::to_npy_bytes(tmod::zeros(shape));
    const std::size_t length = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    return bytes.substr(10, length);
  };
  const auto spaces_then_newline = [](std::string_view tail) {
    return !tail.empty() && tail.back() == '\n' && tail.find_first_not_of(' ') == tail.size() - 1;
  };

  // 10 + 97 + 20 + 1 = 128: already aligned.
  const std::string dict_aligned =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 0, 10000, 10000, 1000, 1000, 1000, 1000), }";
  REQUIRE(dict_aligned.size() == 97);
  const std::string aligned = header_of({1, 0, 10000, 10000, 1000, 1000, 1000, 1000});
  CHECK(aligned.size() == 192 - 10);
  CHECK(aligned.starts_with(dict_aligned));
  CHECK(spaces_then_newline(std::string_view(aligned).substr(dict_aligned.size())));

  // 10 + 98 + 1 = 109 would fit in 128 bytes; the 20 spaces of growth room push it to 192.
  const std::string dict_grown =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 0, 10000, 10000, 10000, 1000, 1000, 1000), }";
  REQUIRE(dict_grown.size() == 98);
  const std::string grown = header_of({1, 0, 10000, 10000, 10000, 1000, 1000, 1000});
  CHECK(grown.size() == 192 - 10);
  CHECK(grown.starts_with(dict_grown));
}

TEST_CASE("npy: numpy's float64/int64 files are narrowed, other versions read") {
  check_values(tmod::io::load_npy(npy_sample("f8_2x2")), {2, 2}, std::vector<float>{0.1f, -2.5f, 1e30f, 3.f});
  check_values(tmod::io::load_npy(npy_sample("i8_4")), {4},
               std::vector<std::int32_t>{-2147483647 - 1, -1, 0, 2147483647});
  const std::vector<float> v2x3{-0.5f, -0.25f, 0.f, 0.25f, 0.5f, 0.75f};
  check_values(tmod::io::load_npy(npy_sample("f4_2x3_v2")), {2, 3}, v2x3);
  check_values(tmod::io::load_npy(npy_sample("f4_2x3_v3")), {2, 3}, v2x3);
}

TEST_CASE("npy: numpy's files of unsupported layouts are rejected with the file's name") {
  const auto check_file = [](const std::string& name, std::string_view fragment) {
    CAPTURE(name);
    const fs::path p = npy_sample(name);
    CHECK_THROWS_WITH_AS((void)tmod::io::load_npy(p),
                         doctest::Contains(p.string().c_str()), tmod::format_error);
    CHECK_THROWS_WITH_AS((void)tmod::io::load_npy(p), doctest::Contains(std::string(fragment).c_str()),
                         tmod::format_error);
  };
  check_file("i8_overflow", "2147483648 at flat index 1 does not fit in int32");
  check_file("f4_fortran_2x3", "Fortran");
  check_file("f4_bigendian_2x3", "big-endian");
  check_file("f2_3", "unsupported dtype '<f2'");
}

TEST_CASE("npy: round trips keep shape, dtype and every bit") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> any_int(std::numeric_limits<std::int32_t>::min(),
                                                      std::numeric_limits<std::int32_t>::max());
  const std::vector<tmod::Shape> shapes{{}, {0}, {1}, {17}, {7, 13}, {2, 0, 5}, {3, 1, 4, 1, 5}, {1, 2, 1, 2, 1, 2, 1, 2}};
  for (const tmod::Shape& shape : shapes) {
    CAPTURE(shape.to_string());
    tmod::Tensor f = tmod::randn(shape, 11);
    if (f.numel() > 0) f.values<float>()[0] = -0.f;
    tmod::Tensor i = tmod::Tensor::empty(shape, tmod::DType::int32);
    for (std::int32_t& v : i.values<std::int32_t>()) v = any_int(rng);

    for (const tmod::Tensor& t : {f, i}) {
      const std::string bytes = tmod::io::to_npy_bytes(t);
      const tmod::Tensor back = parse(bytes);
      REQUIRE(back.shape() == t.shape());
      REQUIRE(back.dtype() == t.dtype());
      CHECK(std::memcmp(bytes.data() + bytes.size() - t.nbytes(),
                        t.dtype() == tmod::DType::float32 ? static_cast<const void*>(back.data<float>())
                                                          : static_cast<const void*>(back.data<std::int32_t>()),
                        t.nbytes()) == 0);
      CHECK(!back.shares_storage_with(t));

      // Version 1.0, data on a 64-byte boundary right after a newline-terminated header.
      CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
      const std::size_t header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
      CHECK((10 + header_len) % 64 == 0);
      CHECK(bytes.size() == 10 + header_len + t.nbytes());
      CHECK(bytes[10 + header_len - 1] == '\n');
    }
  }
}

TEST_CASE("npy: save_npy and load_npy go through the file system") {
  const fs::path p = fs::temp_directory_path() / ("tracemod_npy_" + std::to_string(std::random_device{}()) + ".npy");
  const tmod::Tensor t = tmod::randn({3, 5}, 3);
  tmod::io::save_npy(p, t);
  const tmod::Tensor back = tmod::io::load_npy(p);
  CHECK(golden::compare(back, t, 0.0, 0.0).ok);
  CHECK(read_file(p) == tmod::io::to_npy_bytes(t));

  // Saving again replaces the file.
  tmod::io::save_npy(p, tmod::tensor({1, 2}));
  check_values(tmod::io::load_npy(p), {2}, std::vector<std::int32_t>{1, 2});
  fs::remove(p);

  CHECK_THROWS_WITH_AS((void)tmod::io::load_npy(p), doctest::Contains("file not found"), tmod::format_error);
  CHECK_THROWS_WITH_AS((void)tmod::io::load_npy(p), doctest::Contains(p.string().c_str()), tmod::format_error);
  CHECK_THROWS_WITH_AS((void)tmod::io::load_npy(fs::temp_directory_path()), doctest::Contains("not a regular file"),
                       tmod::format_error);
  const fs::path nowhere = fs::temp_directory_path() / "tracemod_no_such_dir" / "x.npy";
  CHECK_THROWS_WITH_AS(tmod::io::save_npy(nowhere, t), doctest::Contains(nowhere.string().c_str()), tmod::format_error);
  CHECK_THROWS_AS((void)tmod::io::to_npy_bytes(tmod::Tensor{}), tmod::value_error);
}

TEST_CASE("npy: hand-written headers that are valid") {
  check_values(parse(assemble(header_2x3, data_2x3)), {2, 3}, std::vector<float>{-0.5f, -0.25f, 0.f, 0.25f, 0.5f, 0.75f});
  // Key order, quotes, spacing and the trailing comma are free, as in Python.
  check_values(parse(assemble("{\"shape\":(2,3),\"fortran_order\":False,\"descr\":\"<f4\"}", data_2x3)), {2, 3},
               std::vector<float>{-0.5f, -0.25f, 0.f, 0.25f, 0.5f, 0.75f});
  check_values(parse(assemble("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", floats({0.f}))), {1},
               std::vector<std::int32_t>{0});
  check_values(parse(assemble("{'descr':'<f4','fortran_order':False,'shape':()}", floats({2.f}))), {},
               std::vector<float>{2.f});
  check_values(parse(assemble(header_2x3, data_2x3, 2)), {2, 3},
               std::vector<float>{-0.5f, -0.25f, 0.f, 0.25f, 0.5f, 0.75f});
}

TEST_CASE("npy: every malformation is a format_error naming the source and the fault") {
  const std::string good = assemble(header_2x3, data_2x3);
  const auto with_header = [](std::string_view header, std::string_view data = data_2x3) {
    return assemble(header, data);
  };

  check_rejected("", {"<memory>", "bad magic"});
  check_rejected("\x93NUMPZ\x01\x00", {"<memory>", "bad magic"});
  check_rejected(std::string("\x93NUMPY", 6), {"no format version"});
  check_rejected(std::string("\x93NUMPY\x04\x00\x10\x00", 10), {"unsupported format version 4.0"});
  check_rejected(std::string("\x93NUMPY\x01\x01\x10\x00", 10), {"unsupported format version 1.1"});
  check_rejected(std::string("\x93NUMPY\x02\x00\x10\x00", 10), {"no header length"});
  check_rejected(good.substr(0, 20), {"truncated header"});

  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), "),
                 {"expected a quoted string at the end of the header"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3) ]"), {"expected '}' at offset 57"});
  check_rejected(with_header("'descr': '<f4'"), {"expected '{'"});
  check_rejected(with_header("{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3)}"), {"unparsable header"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} x"), {"after the dict"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': false, 'shape': (2, 3)}"), {"True or False"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}"), {"expected '('"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}"), {"integer extent"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (6)}"), {"not a tuple"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}"), {"negative extent"});
  check_rejected(with_header("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3)}"), {"escape"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3"), {"expected ')'"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}"),
                 {"unexpected header key 'x'"});
  check_rejected(with_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}"),
                 {"repeats the key 'descr'"});
  check_rejected(with_header("{'fortran_order': False, 'shape': (2, 3)}"), {"lacks the key 'descr'"});
  check_rejected(with_header("{'descr': '<f4', 'shape': (2, 3)}"), {"lacks the key 'fortran_order'"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False}"), {"lacks the key 'shape'"});
  check_rejected(with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}"), {"structured"});
  check_rejected(with_header("{'descr': '<u4', 'fortran_order': False, 'shape': (2, 3)}"), {"unsupported dtype '<u4'"});
  check_rejected(with_header("{'descr': '>i4', 'fortran_order': False, 'shape': (2, 3)}"), {"big-endian"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}"), {"Fortran"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 6)}"),
                 {"rank 9 exceeds the maximum of 8"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"),
                 {"extent too large"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8)}"),
                 {"too large"});
  check_rejected(with_header(header_2x3, data_2x3.substr(1)), {"data size mismatch", "needs 24 bytes", "holds 23"});
  check_rejected(with_header(header_2x3, data_2x3 + "x"), {"data size mismatch", "holds 25"});
  check_rejected(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3)}", "x"), {"data size mismatch"});
}

TEST_CASE("npy: a float64 value out of float32's range is printed compactly") {
  const auto doubles = [](std::initializer_list<double> values) {
    std::string s(values.size() * sizeof(double), '\0');
    std::memcpy(s.data(), std::data(values), s.size());
    return s;
  };
  const std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n";
  const std::string file = assemble(header, doubles({0.5, -1e300, 2.0}));
  check_rejected(file, {"float64 value -1e+300 at flat index 1 is outside the float32 range"});
  try {
    (void)parse(file);
  } catch (const tmod::format_error& e) {
    CHECK(std::string(e.what()).size() < 120);
  }
  check_rejected(assemble(header, doubles({3.5e38, 0.0, 0.0})), {"float64 value 3.5e+38 at flat index 0"});
}

TEST_CASE("npy: every prefix of a valid file is rejected without reading past it") {
  const std::string good = tmod::io::to_npy_bytes(tmod::randn({3, 5}));
  for (std::size_t n = 0; n < good.size(); ++n) {
    CAPTURE(n);
    // A heap copy of exactly n bytes, so a read past its end is caught by AddressSanitizer.
    const std::vector<char> prefix(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    CHECK_THROWS_AS((void)tmod::io::parse_npy(std::as_bytes(std::span(prefix))), tmod::format_error);
  }
}

TEST_CASE("npy: a corrupted header byte is either read consistently or rejected") {
  const std::string good = tmod::io::to_npy_bytes(tmod::randn({2, 3}));
  std::size_t accepted = 0;
  for (std::size_t at = 0; at < 128; ++at) {
    for (int value = 0; value < 256; ++value) {
      std::string bad = good;
      bad[at] = static_cast<char>(value);
      const std::vector<char> bytes(bad.begin(), bad.end());
      try {
        const tmod::Tensor t = tmod::io::parse_npy(std::as_bytes(std::span(bytes)));
        ++accepted;  // e.g. a padding space turned into a tab, or '<f4' into '<i4'
        CHECK(static_cast<std::size_t>(t.nbytes()) + 128 == bad.size());
      } catch (const tmod::format_error&) {
      }
    }
  }
  CHECK(accepted > 0);
}

TEST_CASE("golden: compare reports shape, dtype and the offending elements") {
  const tmod::Tensor expected = tmod::tensor({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}});
  CHECK(golden::compare(expected, expected.clone(), 0.0, 0.0).ok);

  tmod::Tensor near = expected.clone();
  near.values<float>()[4] = 5.0004f;  // within atol 1e-3
  CHECK(golden::compare(near, expected, 0.0, 1e-3).ok);
  CHECK(golden::compare(near, expected, 1e-4, 0.0).ok);  // rtol: 5 * 1e-4 = 5e-4
  const golden::Comparison tight = golden::compare(near, expected, 0.0, 1e-5);
  CHECK(!tight.ok);
  CHECK(tight.message.find("1 of 6 elements differ") != std::string::npos);
  CHECK(tight.message.find("first at [1, 1]") != std::string::npos);
  CHECK(tight.message.find("expected 5") != std::string::npos);

  tmod::Tensor two_off = expected.clone();
  two_off.values<float>()[0] = 1.5f;
  two_off.values<float>()[5] = 16.f;
  const golden::Comparison worst = golden::compare(two_off, expected, 0.0, 0.1);
  CHECK(worst.message.find("first at [0, 0]") != std::string::npos);
  CHECK(worst.message.find("largest error at [1, 2]: actual 16, expected 6 (abs error 10)") != std::string::npos);

  tmod::Tensor nan = expected.clone();
  nan.values<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK(!golden::compare(nan, expected, 1.0, 1.0).ok);
  CHECK(golden::compare(nan, nan, 0.0, 0.0).ok);

  CHECK(golden::compare(expected, expected.reshape({3, 2}), 1.0, 1.0).message ==
        "shape mismatch: actual (2, 3), expected (3, 2)");
  CHECK(golden::compare(tmod::tensor({1}), tmod::tensor({1.f}), 1.0, 1.0).message ==
        "dtype mismatch: actual int32, expected float32");
  CHECK(!golden::compare(tmod::Tensor{}, expected, 1.0, 1.0).ok);
}

TEST_CASE("golden: the manifest and the files agree") {
  const auto& cases = golden::manifest();
  REQUIRE(cases.size() > 100);
  for (const auto& entry : cases) {
    const std::string& name = entry.first;  // not a structured binding: CAPTURE's lambda captures it
    CAPTURE(name);
    CHECK(golden::has(name, "in0"));
    CHECK(golden::has(name, "out"));
  }
  std::set<std::string> ops;  // the op folders gen_goldens.py writes; other folders belong to other generators
  for (const auto& entry : cases) ops.insert(entry.first.substr(0, entry.first.find('/')));
  std::size_t outputs = 0;
  for (const auto& entry : fs::recursive_directory_iterator(golden::data_dir())) {
    const std::string file = entry.path().filename().string();
    if (!file.ends_with(".out.npy") || !ops.contains(entry.path().parent_path().filename().string())) continue;
    ++outputs;
    const std::string op_case =
        entry.path().parent_path().filename().string() + "/" + file.substr(0, file.size() - std::string(".out.npy").size());
    CHECK_MESSAGE(cases.contains(op_case), op_case << " has files but no manifest line");
  }
  CHECK(outputs == cases.size());

  CHECK(golden::params("conv2d/k1x7_s2x1_p0x3").at("stride") == "2,1");
  CHECK(golden::ints(golden::params("conv2d/k1x7_s2x1_p0x3").at("padding")) == std::vector<std::int64_t>{0, 3});
  CHECK(golden::ints(golden::params("reshape/2x3x4_to_6x-1").at("target_shape")) == std::vector<std::int64_t>{6, -1});
  CHECK(golden::params("batch_norm/train_affine_8x13").at("training") == "true");
  CHECK(golden::params("matmul/7x13_13x17").empty());
  CHECK_THROWS((void)golden::params("conv2d/no_such_case"));
  CHECK(golden::cases("concat").size() == 6);
  CHECK(golden::inputs("concat/axis0_3in").size() == 3);
  CHECK(golden::inputs("linear/7x13_out17_nobias").size() == 2);
}

// The goldens themselves, checked against plain loops: a wrong generator must not go unnoticed.
TEST_CASE("golden: broadcast add and a rank-4 transpose match scalar loops") {
  {
    const tmod::Tensor a = golden::load("add/2x8x5x5_8x1x1", "in0");  // (2, 8, 5, 5)
    const tmod::Tensor b = golden::load("add/2x8x5x5_8x1x1", "in1");  // (8, 1, 1)
    tmod::Tensor expected = tmod::Tensor::empty(a.shape());
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 0; c < 8; ++c)
        for (std::int64_t h = 0; h < 5; ++h)
          for (std::int64_t w = 0; w < 5; ++w)
            expected.values<float>()[static_cast<std::size_t>(((n * 8 + c) * 5 + h) * 5 + w)] =
                a.at({n, c, h, w}) + b.at({c, 0, 0});
    golden::check_close(golden::load("add/2x8x5x5_8x1x1", "out"), expected, 0.0, 0.0, "add/2x8x5x5_8x1x1");
  }
  {
    const tmod::Tensor x = golden::load("transpose/2x3x5x7_p0231", "in0");
    const tmod::Tensor out = golden::load("transpose/2x3x5x7_p0231", "out");
    REQUIRE(out.shape() == tmod::Shape{2, 5, 7, 3});
    std::size_t wrong = 0;
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 0; c < 3; ++c)
        for (std::int64_t h = 0; h < 5; ++h)
          for (std::int64_t w = 0; w < 7; ++w) wrong += out.at({n, h, w, c}) != x.at({n, c, h, w});
    CHECK(wrong == 0);
  }
}

}  // namespace tmod_test_io_npy
