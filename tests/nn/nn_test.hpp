// Helpers shared by the module tests.
#pragma once

#include <tracemod/core/error.hpp>

#include <doctest/doctest.h>

#include <string>

namespace nn_test {

/// The message of the module_error `f` throws (fails the test if it throws nothing or another type).
template <class F>
std::string module_error_of(F&& f) {
  try {
    f();
  } catch (const tracemod::module_error& e) {
    return e.what();
  } catch (...) {
    FAIL("threw something other than tmod::module_error");
    return {};
  }
  FAIL("did not throw");
  return {};
}

}  // namespace nn_test
