// The golden manifest as the functional tests use it: every op it lists has a test that runs its
// cases, and a case parameter the tests do not read fails instead of being ignored.
#include "functional/golden_case.hpp"

#include <doctest/doctest.h>

#include <set>
#include <stdexcept>
#include <string>

namespace {

// The ops whose cases the files of this folder run through golden_case::for_each_case.
const std::set<std::string, std::less<>> tested_ops{
    "relu", "relu6", "neg", "exp", "sigmoid", "tanh", "add", "sub", "mul", "div", "minimum", "maximum",
    "matmul", "linear", "conv2d", "batch_norm", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "softmax",
    "flatten", "reshape", "transpose", "concat"};

TEST_CASE("functional goldens: every op of the manifest is tested") {
  std::set<std::string, std::less<>> listed;
  for (const auto& [name, params] : golden::manifest()) listed.insert(name.substr(0, name.find('/')));
  for (const std::string& op : listed)
    CHECK_MESSAGE(tested_ops.contains(op), "no golden test runs the cases of " << op);
  for (const std::string& op : tested_ops) CHECK_MESSAGE(listed.contains(op), "the manifest has no case of " << op);
  CHECK(golden::manifest().size() >= 200);
}

TEST_CASE("functional goldens: case parameters are parsed strictly") {
  const golden::Params params{{"stride", "2,1"}, {"ceil_mode", "true"}, {"eps", "0.001"}, {"axis", "-1"},
                              {"pattern", "2,0,1"}, {"extra", "3"}};
  golden_case::Args args("op/case", params);
  CHECK(args.pair("stride", 1) == tracemod::functional::pair2{2, 1});
  CHECK(args.pair("padding", 0) == tracemod::functional::pair2{0, 0});
  CHECK(args.flag("ceil_mode", false));
  CHECK(args.real("eps", 1e-5) == 0.001);
  CHECK(args.optional_integer("axis") == -1);
  CHECK_FALSE(args.optional_integer("groups").has_value());
  CHECK(args.required_list("pattern") == tracemod::functional::int_list{2, 0, 1});
  CHECK_THROWS_AS((void)args.required_list("target_shape"), std::runtime_error);
  CHECK_THROWS_WITH_AS(args.finish(), doctest::Contains("extra=3"), std::runtime_error);  // never read
  (void)args.integer("extra", 0);
  CHECK_NOTHROW(args.finish());

  golden_case::Args bad("op/bad", golden::Params{{"ceil_mode", "yes"}, {"stride", "1,2,3"}, {"axis", "1,2"}});
  CHECK_THROWS_AS((void)bad.flag("ceil_mode", false), std::runtime_error);
  CHECK_THROWS_AS((void)bad.pair("stride", 1), std::runtime_error);
  CHECK_THROWS_AS((void)bad.integer("axis", 0), std::runtime_error);
}

}  // namespace
