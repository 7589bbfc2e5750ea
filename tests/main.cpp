// The one doctest main shared by every test executable. After a full run it also runs the checks
// registered through run_checks.hpp. (The library's registries are compiled once, in
// tracemod_instantiate; tests/CMakeLists.txt.)
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "run_checks.hpp"

#include <cstdlib>
#include <iostream>
#include <utility>

namespace run_checks {
namespace {

std::vector<std::pair<std::string, check>>& registry() {
  static std::vector<std::pair<std::string, check>> checks;
  return checks;
}

bool full_run = false;

// Learns at the end of the run whether every registered test case passed the filters.
struct full_run_listener : doctest::IReporter {
  explicit full_run_listener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    full_run = stats.numTestCasesPassingFilters == stats.numTestCases;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
DOCTEST_REGISTER_LISTENER("run_checks_full_run", 0, full_run_listener);

}  // namespace

bool add(std::string name, check c) {
  registry().emplace_back(std::move(name), std::move(c));
  return true;
}

}  // namespace run_checks

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int status = context.run();
  if (context.shouldExit() || !run_checks::full_run) return status;
  int problems = 0;
  for (const auto& [name, check] : run_checks::registry())
    for (const std::string& problem : check()) {
      std::cerr << "run check '" << name << "' failed: " << problem << '\n';
      ++problems;
    }
  if (problems == 0) return status;
  std::cerr << problems << " problem(s) found by the end-of-run checks\n";
  return EXIT_FAILURE;
}
