// pad traced (constant, reflect and replicate before an average pooling), printed, run by the
// interpreter and by the typed graph, through save -> load, and with dynamic dims, each against the
// eager run.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include "serialize/round_trip.hpp"

#include <cstring>
#include <span>
#include <sstream>
#include <string>

namespace tmod_test_serialize_pad {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Tensor;

using serialize_test::round_trip;
using serialize_test::same_bits;
using serialize_test::output_dims;
using serialize_test::text;

/// Each mode once, then a pooling that counts the padding: (N, C, H, W) -> (N, C, H + 2, W + 5).
struct Padded : tmod::Module {
  TM_MODULE(Padded)
  auto forward(const auto& x) const {
    const auto a = F::pad(x, {1, 1, 1, 1});
    const auto b = F::pad(F::relu(a) - 0.25f, {2, 1, 0, 2}, "reflect");
    const auto c = F::pad(b, {1, 0}, "constant", 1.5);
    return F::avg_pool2d(F::pad(c, {0, 1}, "replicate"), 3, 1);
  }
};

struct One : tmod::Module {
  TM_MODULE(One)
  auto forward(const auto& x) const { return F::pad(x, {1, 1, 1, 1}); }
};

const Tensor input = tmod::uniform({2, 3, 5, 6}, -1.f, 1.f, 51);

}  // namespace

TEST_CASE("trace: pad prints as PyTorch's call and runs as traced, typed and loaded") {
  Padded net;
  const Tensor eager = net.forward(input);
  CHECK(eager.shape() == tmod::Shape{2, 3, 7, 11});
  const tmod::TracedModule m = tmod::trace_module(net, input);
  const std::string printed = text(m);
  CAPTURE(printed);
  for (const char* call : {"nn.pad(", "(1, 1, 1, 1)", "(2, 1, 0, 2), reflect", "(1, 0), constant, 1.5", "replicate"})
    CHECK_MESSAGE(printed.find(call) != std::string::npos, call);
  CHECK(same_bits(m(input).tensor(), eager));
  const tmod::TracedModule loaded = round_trip(m);
  CHECK(text(loaded) == printed);
  CHECK(same_bits(loaded(input).tensor(), eager));

  const auto g = tmod::symbolic_trace(net, tmod::spec({2, 3, 5, 6}));
  CHECK(tmod::count_ops<F::pad_fn>(g) == 4);
  CHECK(same_bits(g(input), eager));
}

TEST_CASE("trace: pad with dynamic dims adds its pads to the symbolic extents") {
  const tmod::TraceOptions dynamic{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}};
  One one;
  const tmod::TracedModule p = tmod::trace_module(one, input, dynamic);
  CHECK(output_dims(p) == "(N, 3, H+2, W+2)");
  Padded net;
  const tmod::TracedModule m = tmod::trace_module(net, input, dynamic);
  CHECK(output_dims(m) == "(N, 3, H+2, W+5)");
  const tmod::TracedModule loaded = round_trip(m);
  CHECK(output_dims(loaded) == "(N, 3, H+2, W+5)");
  for (const tmod::Shape& s : {tmod::Shape{1, 3, 4, 4}, tmod::Shape{3, 3, 9, 7}}) {
    CAPTURE(s.to_string());
    const Tensor x = tmod::uniform(s, -1.f, 1.f, 52);
    CHECK(same_bits(loaded(x).tensor(), net.forward(x)));
  }
  // reflect's pads must stay below the extent at run time: 2 is not below H + 2 = 2
  CHECK_THROWS_AS((void)loaded(tmod::zeros({1, 3, 0, 3})), tmod::shape_error);
}

}  // namespace tmod_test_serialize_pad
