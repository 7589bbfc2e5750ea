// The golden manifest as the functional tests use it: every op it lists had its cases run by a
// test (checked after the run, from what golden_case::for_each_case recorded), and a case
// parameter the tests do not read fails instead of being ignored.
#include "functional/golden_case.hpp"
#include "run_checks.hpp"

#include <doctest/doctest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace tmod_test_functional_manifest {

namespace {

std::set<std::string, std::less<>> listed_ops() {
  std::set<std::string, std::less<>> listed;
  for (const auto& [name, params] : golden::manifest()) listed.insert(name.substr(0, name.find('/')));
  return listed;
}

[[maybe_unused]] const bool every_listed_op_ran = run_checks::add("functional goldens", [] {
  std::vector<std::string> problems;
  for (const std::string& op : listed_ops())
    if (!golden_case::ran_ops().contains(op))
      problems.push_back("no test ran the golden cases of " + op + " through golden_case::for_each_case");
  return problems;
});

TEST_CASE("functional goldens: the manifest lists the generated cases") {
  CHECK(golden::manifest().size() >= 200);
  CHECK(listed_ops().size() >= 24);
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

}  // namespace tmod_test_functional_manifest
