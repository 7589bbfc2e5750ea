// save -> load of a graph holding bool tensors: a bool constant and a bool input, where, the
// comparisons, the logical ops and astype(bool); the loaded module prints as the saved one and
// computes the same bytes. A file whose bool blob holds a byte other than 0 or 1 is refused.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>
#include <same_bytes.hpp>

#include <array>
#include <cstring>
#include <limits>
#include <span>
#include <sstream>
#include <string>

namespace tmod_test_serialize_compare {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

using tmod_test::same_bytes;

Tensor bools(std::span<const bool> v, const Shape& s) { return tmod::tensor(v, s); }

/// A fixed bool mask (a constant of the graph) combined with a bool input.
struct Gate : tmod::Module {
  Tensor fixed = bools(std::array<bool, 5>{true, false, true, true, false}, Shape{5});
  TM_MODULE(Gate)
  auto forward(const auto& x, const auto& mask) const {
    const auto m = F::logical_or(mask, tmod::constant(fixed));
    const auto y = F::where(m, x, F::neg(x));
    return std::make_tuple(y, F::logical_and(F::less_equal(x, y), F::astype(x, tmod::bool_)));
  }
};

const Tensor x = tmod::uniform({3, 5}, -1.f, 1.f, 61);
const Tensor mask = bools(std::array<bool, 15>{false, true, false, false, false, true, false, false, false, false,
                                               false, true, true, false, true},
                          Shape{3, 5});

std::string save_bytes(const tmod::TracedModule& m) {
  std::ostringstream os;
  tmod::save(m, os);
  return os.str();
}
tmod::TracedModule load_bytes(const std::string& bytes) {
  return tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

}  // namespace

TEST_CASE("save/load: a graph with a bool constant, a bool input and the bool ops loads and runs as before") {
  Gate net;
  const tmod::TracedModule m = tmod::trace_module(net, x, mask);
  const tmod::TracedModule loaded = load_bytes(save_bytes(m));
  std::ostringstream a, b;
  a << m.graph();
  b << loaded.graph();
  CAPTURE(b.str());
  CHECK(a.str() == b.str());
  CHECK(b.str().find("tensor.where(logical_or_out, x, neg_out, )") != std::string::npos);
  CHECK(b.str().find(".astype(bool, )") != std::string::npos);
  const auto [y, k] = net.forward(x, mask);
  const tmod::Value got = loaded(x, mask);
  REQUIRE(got.size() == 2);
  CHECK(same_bytes(got[0].tensor(), y));
  CHECK(same_bytes(got[1].tensor(), k));
  CHECK(got[1].tensor().dtype() == tmod::bool_);
  // Scalar reference: y is |x| where the input mask or the fixed one holds, -x elsewhere.
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 5; ++j) {
      const bool on = mask.at<bool>({i, j}) || net.fixed.at<bool>({j});
      CHECK(got[0].tensor().at({i, j}) == (on ? x.at({i, j}) : -x.at({i, j})));
    }
}

TEST_CASE("load: a bool tensor whose bytes are not 0 or 1 is a format_error naming it") {
  Gate net;
  std::string bytes = save_bytes(tmod::trace_module(net, x, mask));
  // The fixed mask's blob is the only one: its five bytes 1 0 1 1 0 follow the JSON.
  const std::string pattern("\x01\x00\x01\x01\x00", 5);
  const std::size_t at = bytes.rfind(pattern);
  REQUIRE(at != std::string::npos);
  bytes[at + 1] = '\x07';
  try {
    (void)tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())), {.verify_tensor_checksums = false});
    FAIL("no error");
  } catch (const tmod::format_error& e) {
    CAPTURE(e.what());
    CHECK(std::string(e.what()).find("neither 0 nor 1") != std::string::npos);
  }
}

}  // namespace tmod_test_serialize_compare
