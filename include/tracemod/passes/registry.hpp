// The pass registry: every pass optimize() can run, by name, in registration order (the order
// optimize() runs them in). FuseLayerNorm comes first: NormElemWise rewrites x - y into x + (-y),
// which hides the subtraction a written-out layer norm is recognised by. Then MegEngine's passes in
// MegEngine's order, then the fusions beyond it (a conv's epilogue before elementwise chains, so that
// a relu after a conv joins the conv); register_pass adds more after them.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/extern_template.hpp>
#include <tracemod/passes/attr_to_constant.hpp>
#include <tracemod/passes/backward_fold_scale.hpp>
#include <tracemod/passes/fold_constant.hpp>
#include <tracemod/passes/fuse_add_mul.hpp>
#include <tracemod/passes/fuse_conv_bn.hpp>
#include <tracemod/passes/fuse_conv_epilogue.hpp>
#include <tracemod/passes/fuse_elemwise.hpp>
#include <tracemod/passes/fuse_layer_norm.hpp>
#include <tracemod/passes/norm_elemwise.hpp>
#include <tracemod/passes/pass.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tracemod {

namespace passes {

/// The builtin passes in the order optimize() runs them. A template so that a program may compile the
/// passes in one unit only (core/extern_template.hpp).
template <class = void>
std::vector<Pass> builtin_passes() {
  return {fuse_layer_norm_pass(), attr_to_constant_pass(),    fold_constant_pass(),      norm_elemwise_pass(),
          fuse_conv_bn_pass(),    fuse_add_mul_pass(),         backward_fold_scale_pass(), fuse_conv_epilogue_pass(),
          fuse_elemwise_pass()};
}
TRACEMOD_EXTERN_TEMPLATE(std::vector<Pass> builtin_passes<void>())

}  // namespace passes

class pass_registry {
 public:
  static pass_registry& instance() {
    static pass_registry* r = new pass_registry;  // never destroyed, like the op registry
    return *r;
  }

  /// Adds a pass; throws value_error if the name is taken, the pass has no run function, or its
  /// iteration cap is not positive.
  void add(Pass p) {
    if (p.name.empty()) throw value_error("register_pass: a pass needs a name");
    if (!p.run) throw value_error("register_pass('" + p.name + "'): the pass has no run function");
    if (p.max_iterations < 1)
      throw value_error("register_pass('" + p.name + "'): max_iterations " + std::to_string(p.max_iterations) +
                        " must be positive");
    const std::lock_guard lock(mutex_);
    for (const auto& x : passes_)
      if (x->name == p.name) throw value_error("register_pass: a pass named '" + p.name + "' is already registered");
    passes_.push_back(std::make_shared<const Pass>(std::move(p)));
  }
  /// The pass of that name, or null.
  [[nodiscard]] std::shared_ptr<const Pass> find(std::string_view name) const {
    const std::lock_guard lock(mutex_);
    for (const auto& x : passes_)
      if (x->name == name) return x;
    return nullptr;
  }
  /// The pass of that name; throws value_error listing the registered names.
  [[nodiscard]] std::shared_ptr<const Pass> at(std::string_view name) const {
    if (auto p = find(name)) return p;
    throw value_error("unknown pass '" + std::string(name) + "' (known: " + known() + ")");
  }
  /// Registered names in registration order.
  [[nodiscard]] std::vector<std::string> names() const {
    const std::lock_guard lock(mutex_);
    std::vector<std::string> v;
    for (const auto& x : passes_) v.push_back(x->name);
    return v;
  }
  [[nodiscard]] std::string known() const {
    std::string s;
    for (const std::string& n : names()) s += (s.empty() ? "" : ", ") + n;
    return s;
  }

 private:
  pass_registry() {
    for (Pass& p : passes::builtin_passes()) passes_.push_back(std::make_shared<const Pass>(std::move(p)));
  }

  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const Pass>> passes_;
};

/// Registers a pass under p.name for optimize(); see Pass (passes/pass.hpp).
inline void register_pass(Pass p) { pass_registry::instance().add(std::move(p)); }
/// The registered pass names, in the order optimize() runs them.
[[nodiscard]] inline std::vector<std::string> registered_passes() { return pass_registry::instance().names(); }

}  // namespace tracemod
