// interpolate and M::Upsample traced (every mode, sizes and scale factors), printed, run by the
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

#include <optional>
#include <string>
#include <utility>

namespace tmod_test_serialize_interpolate {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
using tmod::Tensor;

using serialize_test::round_trip;
using serialize_test::same_bits;
using serialize_test::output_dims;
using serialize_test::text;

/// Each mode once through the functional form, then the module: (N, 3, H, W) -> (N, 3, 2 * 9, 2 * 7).
struct Resized : tmod::Module {
  M::Upsample up{{.scale_factor = 2.0, .mode = "bilinear", .align_corners = true}};
  TM_MODULE(Resized, up)
  auto forward(const auto& x) const {
    const auto a = F::interpolate(x, std::nullopt, 1.5);
    const auto b = F::interpolate(F::relu(a), F::pair2{11, 13}, std::nullopt, "bilinear");
    const auto c = F::interpolate(b - 0.25f, F::pair2{9, 7}, std::nullopt, "bilinear", true);
    return up(c);
  }
};

struct Doubled : tmod::Module {
  M::Upsample up{{.scale_factor = 2.0}};
  TM_MODULE(Doubled, up)
  auto forward(const auto& x) const { return up(F::interpolate(x, F::pair2{6, 4}, std::nullopt, "bilinear")); }
};

/// A user module around one Upsample.
struct Wrapped : tmod::Module {
  M::Upsample up;
  explicit Wrapped(M::Upsample u) : up(std::move(u)) {}
  TM_MODULE(Wrapped, up)
  auto forward(const auto& x) const { return up(x); }
};

const Tensor input = tmod::uniform({2, 3, 5, 6}, -1.f, 1.f, 81);

}  // namespace

TEST_CASE("trace: interpolate and Upsample print as PyTorch's calls and run as traced, typed and loaded") {
  Resized net;
  const Tensor eager = net.forward(input);
  CHECK(eager.shape() == tmod::Shape{2, 3, 18, 14});
  const tmod::TracedModule m = tmod::trace_module(net, input);
  const std::string printed = text(m);
  CAPTURE(printed);
  for (const char* call : {"nn.interpolate(", "None, 1.5", "(11, 13), None, bilinear", "(9, 7), None, bilinear, True",
                           "up = getattr(self, \"up\") -> (Upsample)", "up_out = up("})
    CHECK_MESSAGE(printed.find(call) != std::string::npos, call);
  CHECK(same_bits(m(input).tensor(), eager));
  const tmod::TracedModule loaded = round_trip(m);
  CHECK(text(loaded) == printed);
  CHECK(same_bits(loaded(input).tensor(), eager));

  const auto g = tmod::symbolic_trace(net, tmod::spec({2, 3, 5, 6}));
  CHECK(tmod::count_ops<F::interpolate_fn>(g) == 3);
  CHECK(same_bits(g(input), eager));
  // the module's own form, as PyTorch prints it
  CHECK(net.up.extra_repr() == "scale_factor=2.0, mode=bilinear, align_corners=True");
}

TEST_CASE("trace: interpolate with dynamic dims keeps N symbolic, scales H and W by a whole factor") {
  const tmod::TraceOptions dynamic{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}};
  Doubled net;
  const tmod::TracedModule m = tmod::trace_module(net, input, dynamic);
  CHECK(output_dims(m) == "(N, 3, 12, 8)");
  const tmod::TracedModule loaded = round_trip(m);
  CHECK(output_dims(loaded) == "(N, 3, 12, 8)");
  for (const tmod::Shape& s : {tmod::Shape{1, 3, 4, 4}, tmod::Shape{3, 3, 9, 7}}) {
    CAPTURE(s.to_string());
    const Tensor x = tmod::uniform(s, -1.f, 1.f, 82);
    CHECK(same_bits(loaded(x).tensor(), net.forward(x)));
  }
  Wrapped tripled(M::Upsample({.scale_factor = 3.0}));
  const tmod::TracedModule u = tmod::trace_module(tripled, input, dynamic);
  CHECK(output_dims(u) == "(N, 3, H*3, W*3)");
  Wrapped odd(M::Upsample({.scale_factor = 1.5}));
  CHECK_THROWS_WITH_AS((void)tmod::trace_module(odd, input, dynamic), doctest::Contains("needs a static extent on axis 2"),
                       tmod::shape_error);
}

}  // namespace tmod_test_serialize_interpolate
