// NameSpace against a reference written here: fresh names found by trying each suffix in turn, over
// a random sequence of fresh names, claims, releases and clears.
#include <tracemod/graph/namespace.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tmod_test_graph_names {

namespace {

using tracemod::graph::NameSpace;

/// The next name to try after `name`: a trailing `_` and 1 to 17 digits counts up, anything else gets `_1`.
std::string next_candidate(const std::string& name) {
  std::size_t digits = 0;
  while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[name.size() - 1 - digits])) != 0)
    ++digits;
  const std::size_t stem = name.size() - digits;
  if (digits == 0 || digits > 17 || stem == 0 || name[stem - 1] != '_') return name + "_1";
  long long value = 0;
  for (std::size_t i = stem; i < name.size(); ++i) value = value * 10 + (name[i] - '0');
  return name.substr(0, stem) + std::to_string(value + 1);
}

/// Every name with its owner (null: free); a fresh name is the first free, non-reserved candidate.
struct ReferenceNames {
  std::map<std::string, const void*> owners;

  bool taken(const std::string& name) const {
    const auto it = owners.find(name);
    return it != owners.end() && it->second != nullptr;
  }
  std::string create(std::string_view base, const void* owner) {
    std::string name = NameSpace::sanitize(base);
    const auto it = owners.find(name);
    if (owner != nullptr && it != owners.end() && it->second == owner) return name;
    while (taken(name) || NameSpace::is_reserved(name)) name = next_candidate(name);
    owners[name] = owner;
    return name;
  }
  bool claim(const std::string& name, const void* owner) {
    if (taken(name)) return false;
    owners[name] = owner;
    return true;
  }
  void release(const std::string& name) {
    if (const auto it = owners.find(name); it != owners.end()) it->second = nullptr;
  }
};

void check_same(const NameSpace& ns, const ReferenceNames& ref) {
  REQUIRE(ns.entries().size() == ref.owners.size());
  for (const auto& [name, owner] : ref.owners) {
    REQUIRE(ns.owner_of(name) == owner);
    REQUIRE(ns.taken(name) == (owner != nullptr));
  }
}

/// `steps` random operations on both; names come from `bases` and from the names handed out so far.
void run_random(unsigned seed, int steps, const std::vector<std::string>& bases, int clear_every) {
  std::mt19937 rng(seed);
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const int owner_storage[3] = {};
  const void* const owners[4] = {&owner_storage[0], &owner_storage[1], &owner_storage[2], nullptr};
  NameSpace ns;
  ReferenceNames ref;
  std::vector<std::string> seen;
  int fresh = 0, reused = 0;
  std::size_t most_seen = 0;
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    const std::size_t op = pick(100);
    const void* owner = owners[pick(10) == 0 ? 3 : pick(3)];
    if (op < 45 || seen.empty()) {
      const std::string& base = bases[pick(bases.size())];
      const std::string got = ns.create_unique_name(base, owner);
      REQUIRE(got == ref.create(base, owner));
      if (ref.owners.size() > seen.size()) seen.push_back(got);
      else ++reused;
      ++fresh;
    } else if (op < 55) {
      const std::string& name = seen[pick(seen.size())];
      const void* current = ns.owner_of(name);
      REQUIRE(ns.create_unique_name(name, current) == ref.create(name, current));
    } else if (op < 85) {
      const std::string& name = seen[pick(seen.size())];
      ns.release(name);
      ref.release(name);
    } else if (op < 95) {
      const std::string name = pick(2) == 0 ? seen[pick(seen.size())] : "add_out_" + std::to_string(pick(40));
      REQUIRE(ns.claim(name, owner) == ref.claim(name, owner));
      if (ref.owners.size() > seen.size()) seen.push_back(name);
    } else if (clear_every > 0 && pick(static_cast<std::size_t>(clear_every)) == 0) {
      ns.clear();
      ref.owners.clear();
      seen.clear();
    } else {
      const std::string& name = seen[pick(seen.size())];
      ns.release(name);
      ref.release(name);
    }
    check_same(ns, ref);
    most_seen = std::max(most_seen, seen.size());
  }
  CHECK(fresh > steps / 3);
  CHECK(reused > 0);
  CHECK(most_seen > 20);
}

}  // namespace

TEST_CASE("NameSpace: random fresh names, claims and releases give the reference's names") {
  const std::vector<std::string> bases = {"add_out", "add_out", "add_out", "add_out_1", "add_out_3", "add_out_1_1",
                                          "x",       "x_0",     "x_01",    "x_007",     "int",       "a.b",
                                          "a_b",     "9",       "",        "z_",        "z__",       "_1"};
  SUBCASE("many names per base") { run_random(20261129u, 4000, bases, 0); }
  SUBCASE("with clears") { run_random(7u, 3000, bases, 20); }
  SUBCASE("suffixes at the 17-digit limit") {
    run_random(11u, 1500, {"y_99999999999999997", "y_99999999999999999", "y_100000000000000000", "y", "add_out"}, 0);
  }
}

TEST_CASE("NameSpace: fresh names after releases") {
  NameSpace ns;
  int owners[8] = {};
  CHECK(ns.create_unique_name("add_out", &owners[0]) == "add_out");
  CHECK(ns.create_unique_name("add_out", &owners[0]) == "add_out");
  CHECK(ns.create_unique_name("add_out", &owners[1]) == "add_out_1");
  ns.release("add_out_1");
  ns.release("add_out");
  CHECK(ns.create_unique_name("add_out", &owners[2]) == "add_out");
  CHECK(ns.create_unique_name("add_out", &owners[3]) == "add_out_1");
  CHECK(ns.create_unique_name("add_out", &owners[4]) == "add_out_2");
  ns.release("add_out_1");
  CHECK(ns.create_unique_name("add_out_1", &owners[5]) == "add_out_1");
  CHECK(ns.create_unique_name("add_out_1", &owners[6]) == "add_out_3");
  CHECK(ns.create_unique_name("int", &owners[7]) == "int_1");
  CHECK(ns.create_unique_name("x_01", &owners[0]) == "x_01");
  CHECK(ns.create_unique_name("x_01", &owners[1]) == "x_2");
}

}  // namespace tmod_test_graph_names
