// Checks that only make sense once every test case has run, such as "every generated golden case
// was used by some test". The shared main (main.cpp) runs them after a full, unfiltered run and
// fails the executable if one reports a problem; a run filtered with -tc/-ts skips them.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace run_checks {

/// A check returns one message per problem it finds (empty: all is well).
using check = std::function<std::vector<std::string>()>;

/// Registers `c` under `name`; returns true so a namespace-scope `const bool` can call it.
bool add(std::string name, check c);

}  // namespace run_checks
