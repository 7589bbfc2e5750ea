// The reductions traced, printed, run by the interpreter and by the typed graph, and through
// save -> load, each against the eager run; traced with dynamic dims, their symbolic shapes.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/passes.hpp>
#include <tracemod/trace.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include "serialize/round_trip.hpp"

#include <cstring>
#include <span>
#include <sstream>
#include <string>

namespace tmod_test_serialize_reduce {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Tensor;

using serialize_test::round_trip;
using serialize_test::same_bits;
using serialize_test::text;

/// Every reduction: a mean over H and W kept as (N, C, 1, 1) centres x; then sum, max and min over
/// W (one with a negative axis), and a mean over the channels.
struct Net : tmod::Module {
  TM_MODULE(Net)
  auto forward(const auto& x) const {
    const auto y = x - F::mean(x, {2, 3}, true);
    const auto z = F::sum(y * y, {-1}) + F::max(y, {3}) - F::min(x, {-1}, false);
    return F::mean(z, {1});
  }
};

const Tensor input = tmod::uniform({2, 3, 5, 7}, -4.f, 4.f, 17);

}  // namespace

TEST_CASE("trace: the reductions print as MegEngine's calls and run as traced and loaded") {
  Net net;
  const Tensor eager = net.forward(input);
  CHECK(eager.shape() == tmod::Shape{2, 5});
  const tmod::TracedModule m = tmod::trace_module(net, input);
  const std::string printed = text(m);
  CAPTURE(printed);
  for (const char* call : {"math.mean(x, (2, 3), True, )", "math.sum(", "(-1,)", "math.max(", "math.min(", "(1,)"})
    CHECK_MESSAGE(printed.find(call) != std::string::npos, call);
  CHECK(same_bits(m(input).tensor(), eager));

  const tmod::TracedModule loaded = round_trip(m);
  CHECK(text(loaded) == printed);
  CHECK(same_bits(loaded(input).tensor(), eager));
  const tmod::TracedModule optimized = tmod::optimize(m, {"FuseElemwise"});
  CHECK(same_bits(round_trip(optimized)(input).tensor(), eager));

  // Another input through the loaded module: the graph is no record of one run.
  const Tensor other = tmod::randn({2, 3, 5, 7}, 5);
  CHECK(same_bits(loaded(other).tensor(), net.forward(other)));

  const auto g = tmod::symbolic_trace(net, tmod::spec({2, 3, 5, 7}));
  CHECK(tmod::count_ops<F::mean_fn>(g) == 4);  // counted in the expression tree, where y occurs three times
  CHECK(tmod::count_ops<F::max_fn>(g) == 1);
  CHECK(same_bits(g(input), eager));
}

TEST_CASE("trace: the reductions with dynamic dims keep symbolic shapes and run at other sizes") {
  Net net;
  const tmod::TracedModule m =
      tmod::trace_module(net, input, tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}});
  const std::string printed = text(m);
  CAPTURE(printed);
  const auto dims_of = [&](const char* name) {
    return static_cast<const tmod::graph::TensorNode*>(m.graph().get_node_by_name(name, true, false).as_unique())
        ->shape_text();
  };
  CHECK(dims_of("mean_out") == "(N, 3, 1, 1)");  // the mean over H and W, kept
  CHECK(dims_of("sum_out") == "(N, 3, H)");      // sum, max and min over W
  CHECK(dims_of("max_out") == "(N, 3, H)");
  CHECK(dims_of("min_out") == "(N, 3, H)");
  CHECK(static_cast<const tmod::graph::TensorNode*>(m.graph().outputs()[0])->shape_text() == "(N, H)");
  const tmod::TracedModule loaded = round_trip(m);
  CHECK(text(loaded) == printed);
  for (const tmod::Shape& s : {tmod::Shape{1, 3, 9, 4}, tmod::Shape{4, 3, 2, 11}}) {
    const Tensor in = tmod::randn(s, 3);
    CHECK(same_bits(loaded(in).tensor(), net.forward(in)));
  }
}

}  // namespace tmod_test_serialize_reduce
