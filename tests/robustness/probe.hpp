// Helpers of the robustness probes: the error a call throws (type and message), and a byte-for-byte
// snapshot of a module's state to compare before and after a failing call.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/nn/module.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

namespace probe {

/// Runs `call`, which must throw exactly an E (not a subclass of E, not a std:: exception) whose
/// message contains every needle. Returns the message.
template <class E, class Call>
std::string expect_error(std::string_view what, Call&& call, std::initializer_list<std::string_view> needles) {
  CAPTURE(what);
  std::string message;
  try {
    call();
    FAIL_CHECK("did not throw");
    return {};
  } catch (const tracemod::error& e) {
    message = e.what();
    CAPTURE(message);
    CHECK_MESSAGE(typeid(e) == typeid(E), "threw " << typeid(e).name() << ", expected " << typeid(E).name());
  } catch (const std::exception& e) {
    FAIL_CHECK("threw a non-tmod exception: " << typeid(e).name() << ": " << e.what());
    return {};
  }
  for (std::string_view needle : needles) {
    CAPTURE(message);
    CHECK_MESSAGE(message.find(needle) != std::string::npos, "message lacks '" << needle << "'");
  }
  return message;
}

/// Everything observable about a module's state: its tensors' names, shapes, dtypes, bytes and
/// buffer identities, and every module's training flag.
struct module_state {
  std::vector<std::string> names;
  std::vector<std::string> shapes;
  std::vector<std::vector<std::byte>> bytes;
  std::vector<const void*> buffers;
  std::vector<bool> training;

  static module_state of(const tracemod::Module& m) {
    module_state s;
    for (const auto& [name, t] : m.named_tensors()) {
      s.names.push_back(name);
      s.shapes.push_back(t.shape().to_string() + std::string(tracemod::dtype_name(t.dtype())));
      const auto* p = t.dtype() == tracemod::DType::float32 ? static_cast<const void*>(t.data<float>())
                                                            : static_cast<const void*>(t.data<std::int32_t>());
      s.buffers.push_back(p);
      std::vector<std::byte> b(t.nbytes());
      if (!b.empty()) std::memcpy(b.data(), p, b.size());
      s.bytes.push_back(std::move(b));
    }
    for (const auto& named : m.named_modules()) s.training.push_back(named.second.training());
    return s;
  }
  friend bool operator==(const module_state&, const module_state&) = default;
};

/// Checks that `call` throws E naming `needles` and leaves `m`'s state byte-for-byte unchanged.
template <class E, class Call>
void expect_atomic_failure(std::string_view what, const tracemod::Module& m, Call&& call,
                           std::initializer_list<std::string_view> needles) {
  CAPTURE(what);
  const module_state before = module_state::of(m);
  expect_error<E>(what, call, needles);
  CHECK_MESSAGE(module_state::of(m) == before, "the failing call changed the module's state");
}

}  // namespace probe
