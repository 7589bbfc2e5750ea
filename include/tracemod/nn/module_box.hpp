// The storage behind a module's run-time members: the slots every traversal walks and the
// children and tensors added with setattr (boxed so that copying a module copies its tree).
#pragma once

#include <tracemod/core/tensor.hpp>
#include <tracemod/nn/member_kind.hpp>
#include <tracemod/nn/parameter.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <variant>

namespace tracemod {

class Module;


namespace detail {

/// One direct member of a module instance, as the run-time API walks it.
struct member_slot {
  std::string name;
  member_kind kind;
  Module* module = nullptr;  // kind == module
  Tensor* tensor = nullptr;  // kind == parameter or buffer
  bool reflected = true;
};

/// Owns a child added with setattr (its members are defined in module.hpp, once Module is complete). Copying copies the child's module tree (as copying a module does).
class module_box {
 public:
  explicit module_box(std::unique_ptr<Module> m);  // defined in module.hpp, where Module is complete
  module_box(const module_box& other);
  module_box& operator=(const module_box& other);
  module_box(module_box&&) noexcept = default;
  module_box& operator=(module_box&&) noexcept = default;
  ~module_box();

  [[nodiscard]] Module& get() const noexcept { return *ptr_; }

 private:
  friend struct module_access;
  std::unique_ptr<Module> ptr_;
};

struct dynamic_attr {
  std::string name;
  std::variant<Parameter, Buffer, module_box> value;
};

struct module_access;

[[nodiscard]] inline std::string join_path(std::string_view prefix, std::string_view name) {
  return prefix.empty() ? std::string(name) : std::string(prefix) + "." + std::string(name);
}

}  // namespace detail

}  // namespace tracemod
