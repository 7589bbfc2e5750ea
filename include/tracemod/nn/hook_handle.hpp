// Forward hooks (MegEngine's and PyTorch's register_forward_pre_hook / register_forward_hook): the
// hook types, the registration records a module holds, and HookHandle, which removes one.
//
// A registration is one shared record: the module holds it, every copy of the module holds the same
// record, and the handle refers to it weakly. remove() sets the record's atomic flag, which every
// call checks, so it takes effect on the module and its copies at once, may run while they run on
// other threads, and is a no-op when repeated or when every module holding the record is gone.
#pragma once

#include <tracemod/core/meta.hpp>
#include <tracemod/core/value.hpp>

#include <algorithm>
#include <atomic>
#include <concepts>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod {

class Module;

/// fn(module, inputs): runs before forward; returns replacement inputs, or nullopt to keep them.
using ForwardPreHook = std::function<std::optional<ValueList>(const Module&, std::span<const Value>)>;
/// fn(module, inputs, output): runs after forward; returns a replacement output, or nullopt.
using ForwardHook = std::function<std::optional<Value>(const Module&, std::span<const Value>, const Value&)>;

namespace detail {

/// One registration. Exactly one of `pre` and `post` is set.
struct hook_record {
  ForwardPreHook pre;
  ForwardHook post;
  std::atomic<bool> removed{false};
  [[nodiscard]] bool live() const noexcept { return !removed.load(std::memory_order_acquire); }
};

using hook_records = std::vector<std::shared_ptr<hook_record>>;

/// A module's hooks in registration order.
struct hook_list {
  hook_records pre, post;
  [[nodiscard]] static bool any_live(const hook_records& records) noexcept {
    return std::any_of(records.begin(), records.end(), [](const auto& r) { return r->live(); });
  }
  void prune() {
    for (hook_records* records : {&pre, &post})
      std::erase_if(*records, [](const auto& r) { return !r->live(); });
  }
  [[nodiscard]] bool empty() const noexcept { return pre.empty() && post.empty(); }
};

/// The hooks member of Module: null until the first registration, so a call of a module without
/// hooks tests one pointer. A copy holds the same live records (a copy's hooks are the original's).
class hook_slot {
 public:
  hook_slot() = default;
  hook_slot(const hook_slot& other) : list_(other.copy_list()) {}
  hook_slot& operator=(const hook_slot& other) {
    if (this != &other) list_ = other.copy_list();
    return *this;
  }
  hook_slot(hook_slot&&) noexcept = default;
  hook_slot& operator=(hook_slot&&) noexcept = default;
  ~hook_slot() = default;

  [[nodiscard]] const hook_list* get() const noexcept { return list_.get(); }
  /// The list to append to, without the records removed since the last change.
  hook_list& edit() {
    if (!list_) list_ = std::make_unique<hook_list>();
    list_->prune();
    return *list_;
  }
  void clear() noexcept { list_.reset(); }

 private:
  [[nodiscard]] std::unique_ptr<hook_list> copy_list() const {
    if (!list_) return nullptr;
    auto copy = std::make_unique<hook_list>(*list_);
    copy->prune();
    if (copy->empty()) return nullptr;
    return copy;
  }
  std::unique_ptr<hook_list> list_;
};

/// The hook as a ForwardPreHook: fn may return void, ValueList, std::optional<ValueList>, or one
/// value (a Tensor or a Value: the single replacement input, as Python wraps a non-tuple).
template <class F>
ForwardPreHook make_pre_hook(F&& fn) {
  using Fn = std::decay_t<F>;
  if constexpr (!std::is_invocable_v<const Fn&, const Module&, std::span<const Value>>) {
    static_assert(always_false_v<F>,
                  "register_forward_pre_hook: the hook must be callable as fn(const tmod::Module&, "
                  "std::span<const tmod::Value> inputs)");
    return {};
  } else {
    using R = std::invoke_result_t<const Fn&, const Module&, std::span<const Value>>;
    static_assert(std::is_void_v<R> || std::convertible_to<R, std::optional<ValueList>> || std::convertible_to<R, Value>,
                  "register_forward_pre_hook: the hook must return void, tmod::ValueList, "
                  "std::optional<tmod::ValueList>, or one replacement input (tmod::Tensor or tmod::Value)");
    return [f = Fn(std::forward<F>(fn))](const Module& m, std::span<const Value> in) -> std::optional<ValueList> {
      if constexpr (std::is_void_v<R>) {
        f(m, in);
        return std::nullopt;
      } else if constexpr (std::convertible_to<R, std::optional<ValueList>>) {
        return f(m, in);
      } else {
        return ValueList{Value(f(m, in))};
      }
    };
  }
}

/// The hook as a ForwardHook: fn may return void, std::optional<Value>, or a replacement output
/// (a Tensor or a Value).
template <class F>
ForwardHook make_forward_hook(F&& fn) {
  using Fn = std::decay_t<F>;
  if constexpr (!std::is_invocable_v<const Fn&, const Module&, std::span<const Value>, const Value&>) {
    static_assert(always_false_v<F>,
                  "register_forward_hook: the hook must be callable as fn(const tmod::Module&, "
                  "std::span<const tmod::Value> inputs, const tmod::Value& output)");
    return {};
  } else {
    using R = std::invoke_result_t<const Fn&, const Module&, std::span<const Value>, const Value&>;
    static_assert(std::is_void_v<R> || std::convertible_to<R, std::optional<Value>>,
                  "register_forward_hook: the hook must return void, std::optional<tmod::Value>, or a replacement "
                  "output (tmod::Tensor or tmod::Value)");
    return [f = Fn(std::forward<F>(fn))](const Module& m, std::span<const Value> in,
                                         const Value& out) -> std::optional<Value> {
      if constexpr (std::is_void_v<R>) {
        f(m, in, out);
        return std::nullopt;
      } else {
        return f(m, in, out);
      }
    };
  }
}

}  // namespace detail

/// Removes one hook (what register_forward_pre_hook / register_forward_hook return). Copyable; its
/// destruction does not remove the hook (as PyTorch's RemovableHandle): a hook stays until remove().
class [[nodiscard]] HookHandle {
 public:
  HookHandle() noexcept = default;

  /// Removes the hook from the module it was registered on and from every copy of that module that
  /// holds it. Calls already past the hook's turn keep what it did. Idempotent; safe after the
  /// modules are destroyed or moved, and while they run on other threads.
  void remove() noexcept {
    if (const std::shared_ptr<detail::hook_record> r = record_.lock()) r->removed.store(true, std::memory_order_release);
    record_.reset();
  }
  /// Whether the hook is registered on some module (false after remove() or once its modules are gone).
  [[nodiscard]] bool active() const noexcept {
    const std::shared_ptr<detail::hook_record> r = record_.lock();
    return r != nullptr && r->live();
  }

 private:
  friend class Module;
  explicit HookHandle(std::weak_ptr<detail::hook_record> record) noexcept : record_(std::move(record)) {}
  std::weak_ptr<detail::hook_record> record_;
};

}  // namespace tracemod
