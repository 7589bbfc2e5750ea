// The storage behind a module's run-time members: the slots every traversal walks and the
// children and tensors added with setattr (boxed so that copying a module copies its tree).
#pragma once

#include <tracemod/core/tensor.hpp>
#include <tracemod/nn/member_kind.hpp>
#include <tracemod/nn/parameter.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

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

/// Owns a child added with setattr (its members are defined in module.hpp, once Module is complete).
/// Ownership is shared: Module::share_module makes a second attribute hold the same module. Copying
/// copies the child's module tree (as copying a module does); within one copy (copy_scope), a module
/// held by several boxes is copied once and the copies' boxes share that copy, as deepcopy's memo does.
class module_box {
 public:
  explicit module_box(std::unique_ptr<Module> m);  // defined in module.hpp, where Module is complete
  explicit module_box(std::shared_ptr<Module> m) noexcept : ptr_(std::move(m)) {}
  module_box(const module_box& other);
  module_box& operator=(const module_box& other);
  module_box(module_box&&) noexcept = default;
  module_box& operator=(module_box&&) noexcept = default;
  ~module_box();

  [[nodiscard]] Module& get() const noexcept { return *ptr_; }
  [[nodiscard]] const std::shared_ptr<Module>& shared() const noexcept { return ptr_; }

 private:
  friend struct module_access;
  std::shared_ptr<Module> ptr_;
};

/// The modules already copied by the module copy running on this thread (original -> copy), so that
/// a module shared by several attributes is copied once. A copy_scope spans one copy; the outermost
/// scope's end forgets the copies.
struct copy_memo {
  std::vector<std::pair<const Module*, std::shared_ptr<Module>>> copies;
  int depth = 0;
  static copy_memo& current() noexcept {
    thread_local copy_memo memo;
    return memo;
  }
};

class copy_scope {
 public:
  copy_scope() noexcept { ++copy_memo::current().depth; }
  copy_scope(const copy_scope&) = delete;
  copy_scope& operator=(const copy_scope&) = delete;
  ~copy_scope() {
    copy_memo& memo = copy_memo::current();
    if (--memo.depth == 0) {
      auto done = std::move(memo.copies);  // released after the memo is consistent again
      memo.copies.clear();
    }
  }
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
