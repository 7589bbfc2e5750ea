// Module: the polymorphic base of every module, with the run-time API of MegEngine's / PyTorch's
// Module (parameters, buffers, children, dotted paths, state_dict, train/eval, dynamic attributes).
//
// A module's members come from two places: the ones its class lists in TM_MODULE (reflected: fixed
// C++ types, known at compile time, see reflection.hpp) and the ones added at run time with
// setattr (dynamic). Every traversal lists a module's reflected members in TM_MODULE order, then its
// dynamic ones in insertion order. Undefined tensors (a Parameter constructed empty, PyTorch's
// `bias=None`) are attributes but are skipped by the parameter/buffer/tensor lists and state_dict.
//
// Copying a module copies its tree of modules; the copy's tensors share their buffers with the
// original's (Tensor copies are handles). clone() copies the tensors' data as well. Both keep the
// forward hooks: a copy holds the same registrations (nn/hook_handle.hpp). A module held by two
// dynamic attributes (share_module) is one object, and its copy is one object of the copy.
#pragma once

#include <tracemod/core/dim.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/functional/cost.hpp>
#include <tracemod/nn/attr_ref.hpp>
#include <tracemod/nn/hook_handle.hpp>
#include <tracemod/nn/member_kind.hpp>
#include <tracemod/nn/module_box.hpp>
#include <tracemod/nn/parameter.hpp>
#include <tracemod/nn/state_dict.hpp>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

namespace tracemod {

class Module;

/// How deeply modules may nest (the root is depth 0). Traversals walk the tree iteratively, but a
/// module copy and the recursion of user code are one C++ call per level, so the depth is capped
/// with a clear module_error instead of exhausting the stack. PyTorch's default recursion limit
/// gives about the same bound; real networks nest a few levels deep.
inline constexpr std::size_t max_module_depth = 1000;

class Module {
 public:
  /// An attribute with its dotted path; T& aliases the module's own object.
  template <class T>
  using named = std::pair<std::string, T&>;
  template <class T>
  using refs = std::vector<std::reference_wrapper<T>>;

  virtual ~Module() = default;

  /// The class name as written in TM_MODULE ("Conv2d", "ResNet").
  [[nodiscard]] virtual std::string_view type_name() const = 0;
  /// Builtin modules are opaque to the tracer (one call in a graph); user modules are traced through.
  [[nodiscard]] virtual bool is_builtin() const noexcept = 0;
  /// The hyper-parameters shown by repr(), as PyTorch's extra_repr: "3, 64, kernel_size=(7, 7)".
  [[nodiscard]] virtual std::string extra_repr() const { return {}; }

  /// Runs a builtin module's forward on tensors (the runtime graph's interpreter calls builtin
  /// modules this way); throws module_error for a user module or a wrong number of inputs.
  [[nodiscard]] Tensor call_erased(std::span<const Tensor> inputs) const { return tracemod_call_erased_(inputs); }
  /// The output shape of call_erased for inputs of these shapes (throws like the call would).
  [[nodiscard]] Shape infer_shape_erased(std::span<const Shape> inputs) const {
    return tracemod_infer_shape_erased_(inputs);
  }
  /// The symbolic output shape (core/dim.hpp) of call_erased for inputs with these dims: a builtin
  /// module's `infer_dims(inputs...)`; nullopt for a module that does not state one.
  [[nodiscard]] std::optional<Dims> infer_dims_erased(std::span<const ShapeDims> inputs) const {
    return tracemod_infer_dims_erased_(inputs);
  }
  /// The cost (functional/cost.hpp) of call_erased for inputs of these shapes: a builtin module's
  /// `cost(shapes...)`, which states it through its functional equivalent; nullopt for a module
  /// that does not state one.
  [[nodiscard]] std::optional<functional::op_cost> cost_erased(std::span<const Shape> inputs) const {
    return tracemod_cost_erased_(inputs);
  }

  // ---- training mode -------------------------------------------------------------------------

  /// Sets the training flag of this module and every descendant.
  Module& train(bool mode = true) {
    for (Module& m : modules()) m.flags_.training = mode;  // listed first: a too-deep tree throws before any change
    return *this;
  }
  Module& eval() { return train(false); }
  [[nodiscard]] bool training() const noexcept { return flags_.training; }
  /// MegEngine's disable_quantize: quant::prepare leaves this module and every descendant float.
  Module& disable_quantize(bool disabled = true) {
    for (Module& m : modules()) m.flags_.quantize_disabled = disabled;
    return *this;
  }
  [[nodiscard]] bool quantize_disabled() const noexcept { return flags_.quantize_disabled; }

  // ---- traversal -----------------------------------------------------------------------------

  [[nodiscard]] std::vector<named<Parameter>> named_parameters(std::string_view prefix = "", bool recursive = true) {
    return collect_tensors<Parameter>(prefix, recursive, true, false);
  }
  [[nodiscard]] std::vector<named<const Parameter>> named_parameters(std::string_view prefix = "",
                                                                     bool recursive = true) const {
    return collect_tensors<const Parameter>(prefix, recursive, true, false);
  }
  [[nodiscard]] std::vector<named<Buffer>> named_buffers(std::string_view prefix = "", bool recursive = true) {
    return collect_tensors<Buffer>(prefix, recursive, false, true);
  }
  [[nodiscard]] std::vector<named<const Buffer>> named_buffers(std::string_view prefix = "",
                                                               bool recursive = true) const {
    return collect_tensors<const Buffer>(prefix, recursive, false, true);
  }
  /// Parameters and buffers: per module its parameters, then its buffers (state_dict order).
  [[nodiscard]] std::vector<named<Tensor>> named_tensors(std::string_view prefix = "", bool recursive = true) {
    return collect_tensors<Tensor>(prefix, recursive, true, true);
  }
  [[nodiscard]] std::vector<named<const Tensor>> named_tensors(std::string_view prefix = "",
                                                               bool recursive = true) const {
    return collect_tensors<const Tensor>(prefix, recursive, true, true);
  }
  /// Direct child modules; a child held by two attributes (share_module) is listed once, under the first.
  [[nodiscard]] std::vector<named<Module>> named_children() { return collect_children<Module>(); }
  [[nodiscard]] std::vector<named<const Module>> named_children() const { return collect_children<const Module>(); }
  /// This module (named `prefix`) and every descendant, pre-order. remove_duplicate (PyTorch's
  /// default): a module reachable by several paths (share_module) is listed once, under the first
  /// path in pre-order, and its subtree once; false lists every path.
  [[nodiscard]] std::vector<named<Module>> named_modules(std::string_view prefix = "", bool remove_duplicate = true) {
    return collect_modules<Module>(prefix, remove_duplicate);
  }
  [[nodiscard]] std::vector<named<const Module>> named_modules(std::string_view prefix = "",
                                                               bool remove_duplicate = true) const {
    return collect_modules<const Module>(prefix, remove_duplicate);
  }

  [[nodiscard]] refs<Parameter> parameters(bool recursive = true) { return values(named_parameters("", recursive)); }
  [[nodiscard]] refs<const Parameter> parameters(bool recursive = true) const {
    return values(named_parameters("", recursive));
  }
  [[nodiscard]] refs<Buffer> buffers(bool recursive = true) { return values(named_buffers("", recursive)); }
  [[nodiscard]] refs<const Buffer> buffers(bool recursive = true) const { return values(named_buffers("", recursive)); }
  [[nodiscard]] refs<Tensor> tensors(bool recursive = true) { return values(named_tensors("", recursive)); }
  [[nodiscard]] refs<const Tensor> tensors(bool recursive = true) const { return values(named_tensors("", recursive)); }
  [[nodiscard]] refs<Module> children() { return values(named_children()); }
  [[nodiscard]] refs<const Module> children() const { return values(named_children()); }
  [[nodiscard]] refs<Module> modules() { return values(named_modules()); }
  [[nodiscard]] refs<const Module> modules() const { return values(named_modules()); }

  // ---- state -----------------------------------------------------------------------------------

  /// Every defined parameter and buffer by dotted path, in PyTorch's order. The tensors share their
  /// buffers with the module (as torch's state_dict does): writing into them changes the module. A
  /// shared sub-module's tensors are listed under each of its paths (as in PyTorch), while the
  /// parameter/buffer/tensor lists give them once.
  [[nodiscard]] StateDict state_dict() const {
    StateDict result;
    for (const auto& [name, t] : collect_tensors<const Tensor>("", true, true, true, false)) result.insert(name, t);
    return result;
  }

  /// Copies the values of `dict` into the module's existing tensors (whose shapes and dtypes must
  /// match). strict: any missing key, unexpected key or mismatch throws module_error listing every
  /// offending key, and nothing is loaded. Non-strict: the matching entries are loaded and the rest
  /// is reported.
  IncompatibleKeys load_state_dict(const StateDict& dict, bool strict = true);

  // ---- dynamic attributes (dotted paths; digits name container children: "layer1.0.conv1") -----

  /// Adds a child module, or replaces one. A reflected member can only receive a module of its
  /// own C++ type (its value is replaced); a dynamic one can receive any module.
  template <class M>
    requires std::derived_from<std::remove_cvref_t<M>, Module>
  void setattr(std::string_view path, M&& module) {
    using T = std::remove_cvref_t<M>;
    static_assert(requires { typename T::tracemod_reflected; } && std::same_as<typename T::tracemod_reflected, T>,
                  "tmod::Module::setattr: the module's class must declare TM_MODULE(Class, ...) itself");
    std::string_view leaf;
    check_set_module(path, module, leaf);  // before the move: a failed setattr leaves `module` intact
    set_module(path, std::make_unique<T>(std::forward<M>(module)));
  }
  /// Adds or replaces a child module given as an owning pointer (any module class; the runtime
  /// graph's surgery and trace_module build module trees this way).
  void setattr(std::string_view path, std::unique_ptr<Module> module) {
    if (module == nullptr) throw module_error("setattr('" + std::string(path) + "'): the module is null");
    set_module(path, std::move(module));
  }
  /// Adds or rebinds a tensor attribute. A plain Tensor becomes a buffer (MegEngine's rule: every
  /// tensor attribute that is not a Parameter is a buffer); a reflected member keeps its kind.
  void setattr(std::string_view path, const Parameter& p) { set_tensor(path, member_kind::parameter, p); }
  void setattr(std::string_view path, const Buffer& b) { set_tensor(path, member_kind::buffer, b); }
  void setattr(std::string_view path, const Tensor& t) { set_tensor(path, member_kind::buffer, t); }

  /// The attribute at `path`; throws module_error naming the path if there is none.
  [[nodiscard]] AttrRef getattr(std::string_view path) {
    const detail::member_slot slot = find_or_throw(path, "getattr");
    return {std::string(path), slot.kind, slot.module, slot.tensor};
  }
  [[nodiscard]] ConstAttrRef getattr(std::string_view path) const {
    const detail::member_slot slot = find_or_throw(path, "getattr");
    return {std::string(path), slot.kind, slot.module, slot.tensor};
  }
  [[nodiscard]] bool has_attr(std::string_view path) const {
    std::string why;
    return find(path, why).has_value();
  }
  /// Removes an attribute added with setattr (reflected members cannot be removed).
  void delattr(std::string_view path);

  // ---- forward hooks (docs/modules.md, "Hooks") ------------------------------------------------

  /// Registers fn(module, inputs), run before forward on every call of this module (eager, or as
  /// a call in a runtime graph); it may return replacement inputs. Hooks run in registration order.
  template <class F>
  HookHandle register_forward_pre_hook(F&& fn) {
    return register_hook(hooks_.edit().pre, {detail::make_pre_hook(std::forward<F>(fn)), {}});
  }
  /// Registers fn(module, inputs, output), run after forward; it may return a replacement output.
  template <class F>
  HookHandle register_forward_hook(F&& fn) {
    return register_hook(hooks_.edit().post, {{}, detail::make_forward_hook(std::forward<F>(fn))});
  }
  /// Removes this module's own hooks (its copies and children keep theirs).
  void clear_forward_hooks() noexcept { hooks_.clear(); }

  /// Makes the dynamic attribute `alias_path` hold the module at `target_path` itself (one object, as
  /// `self.h = self.i` in Python): a weight changed through one path is seen through the other. The
  /// target must be a module added with setattr (a reflected member is held by value and cannot be
  /// shared); the alias is a dynamic attribute, created or replaced. Throws module_error naming the
  /// paths for a missing target, a tensor, a reflected alias name, or an alias inside its target (a
  /// module cannot contain itself).
  void share_module(std::string_view alias_path, std::string_view target_path);

  // ---- copies and printing ---------------------------------------------------------------------

  /// A deep copy: a new module tree with new tensor buffers (tensors that were one handle stay one).
  /// A reflected class's own clone() returns the concrete type instead.
  [[nodiscard]] std::unique_ptr<Module> clone() const;

  /// The module tree in PyTorch's format: `Sequential(\n  (0): Conv2d(3, 8, ...)\n ...)`.
  [[nodiscard]] std::string repr() const;

 protected:
  Module() = default;
  // A copy keeps the sharing among its dynamic attributes (copy_scope) and the hook registrations.
  Module(const Module& other)
      : dynamic_(copy_dynamic(other.dynamic_)), flags_(other.flags_), hooks_(other.hooks_) {}
  Module(Module&&) noexcept = default;
  Module& operator=(const Module& other) {
    if (this != &other) {
      auto copy = copy_dynamic(other.dynamic_);
      dynamic_ = std::move(copy);
      flags_ = other.flags_;
      hooks_ = other.hooks_;
    }
    return *this;
  }
  Module& operator=(Module&&) noexcept = default;

  // Generated by TM_MODULE (or written by the containers).
  /// Appends one slot per reflected member, in declaration order.
  virtual void tracemod_members_(std::vector<detail::member_slot>& out) const = 0;
  /// A copy of the most-derived object (tensors shared).
  [[nodiscard]] virtual std::unique_ptr<Module> tracemod_copy_() const = 0;
  /// Move-assigns `source`, whose dynamic type is this object's, to the most-derived object.
  virtual void tracemod_assign_(Module&& source) = 0;
  /// Behind call_erased / infer_shape_erased (generated for builtin modules).
  [[nodiscard]] virtual Tensor tracemod_call_erased_(std::span<const Tensor>) const {
    throw module_error(std::string(type_name()) + " is not a builtin module: its forward is traced, not called erased");
  }
  [[nodiscard]] virtual Shape tracemod_infer_shape_erased_(std::span<const Shape>) const {
    throw module_error(std::string(type_name()) + " is not a builtin module: it has no shape inference of its own");
  }
  [[nodiscard]] virtual std::optional<functional::op_cost> tracemod_cost_erased_(std::span<const Shape>) const {
    return std::nullopt;
  }
  [[nodiscard]] virtual std::optional<Dims> tracemod_infer_dims_erased_(std::span<const ShapeDims>) const {
    return std::nullopt;
  }

 private:
  friend struct detail::module_access;

  static std::vector<detail::dynamic_attr> copy_dynamic(const std::vector<detail::dynamic_attr>& d) {
    const detail::copy_scope scope;
    return d;
  }

  /// Reflected members, then dynamic ones.
  [[nodiscard]] std::vector<detail::member_slot> own_members() const {
    std::vector<detail::member_slot> slots;
    tracemod_members_(slots);
    for (const detail::dynamic_attr& d : dynamic_) slots.push_back(dynamic_slot_of(d));
    return slots;
  }
  static detail::member_slot dynamic_slot_of(const detail::dynamic_attr& d) {
    detail::member_slot s{d.name, member_kind::module, nullptr, nullptr, false};
    if (const auto* p = std::get_if<Parameter>(&d.value)) {
      s.kind = member_kind::parameter;
      s.tensor = const_cast<Parameter*>(p);
    } else if (const auto* b = std::get_if<Buffer>(&d.value)) {
      s.kind = member_kind::buffer;
      s.tensor = const_cast<Buffer*>(b);
    } else {
      s.module = &std::get<detail::module_box>(d.value).get();
    }
    return s;
  }
  /// The own member `name`. Dynamic members are looked at first, without listing the reflected ones
  /// (a traced module has dynamic members only; the interpreter's getattrs land here): a dynamic
  /// name never shadows a reflected one, since setattr of a reflected name assigns the member.
  [[nodiscard]] std::optional<detail::member_slot> own_member(std::string_view name) const {
    for (const detail::dynamic_attr& d : dynamic_)
      if (d.name == name) return dynamic_slot_of(d);
    std::vector<detail::member_slot> slots;
    tracemod_members_(slots);
    for (detail::member_slot& s : slots)
      if (s.name == name) return std::move(s);
    return std::nullopt;
  }

  /// Calls f(path, module) for this module and (if recursive) every descendant, pre-order. Iterative,
  /// so the depth costs heap, not stack; a tree deeper than max_module_depth is a module_error.
  /// remove_duplicate: a module reached again (a shared sub-module) is skipped with its subtree, so
  /// its first path in pre-order wins (PyTorch's memo).
  template <class F>
  void for_each_module(const std::string& path, bool recursive, F&& f, bool remove_duplicate = true) const {
    struct pending {
      std::string path;
      const Module* module;
      std::size_t depth;
    };
    std::vector<pending> stack{{path, this, 0}};
    std::unordered_set<const Module*> seen;
    while (!stack.empty()) {
      pending top = std::move(stack.back());
      stack.pop_back();
      if (remove_duplicate && !seen.insert(top.module).second) continue;
      f(top.path, *top.module);
      if (!recursive) return;
      const auto slots = top.module->own_members();
      for (auto it = slots.rbegin(); it != slots.rend(); ++it) {  // reversed: children pop in order
        if (it->kind != member_kind::module) continue;
        if (top.depth + 1 > max_module_depth) throw too_deep(top.path);
        stack.push_back({detail::join_path(top.path, it->name), it->module, top.depth + 1});
      }
    }
  }

  [[nodiscard]] static module_error too_deep(std::string_view path) {
    const std::string shown = path.size() > 60 ? std::string(path.substr(0, 60)) + "..." : std::string(path);
    return module_error("the module tree nests deeper than max_module_depth (" + std::to_string(max_module_depth) +
                        " levels) below '" + shown + "'");
  }

  /// Levels below this module (0 for a leaf); module_error beyond max_module_depth.
  [[nodiscard]] std::size_t height() const {
    std::size_t deepest = 0;
    for_each_module("", true, [&](const std::string& path, const Module&) {
      if (!path.empty()) deepest = std::max<std::size_t>(deepest, 1 + std::count(path.begin(), path.end(), '.'));
    });
    return deepest;
  }

  template <class T>
  [[nodiscard]] std::vector<named<T>> collect_tensors(std::string_view prefix, bool recursive, bool params,
                                                      bool buffers, bool remove_duplicate = true) const {
    std::vector<named<T>> result;
    for_each_module(std::string(prefix), recursive, [&](const std::string& path, const Module& m) {
      const auto slots = m.own_members();
      for (const member_kind kind : {member_kind::parameter, member_kind::buffer}) {
        if (!(kind == member_kind::parameter ? params : buffers)) continue;
        for (const detail::member_slot& s : slots)
          if (s.kind == kind && s.tensor->defined())
            result.emplace_back(detail::join_path(path, s.name), static_cast<T&>(*s.tensor));
      }
    }, remove_duplicate);
    return result;
  }

  template <class T>
  [[nodiscard]] std::vector<named<T>> collect_children(bool remove_duplicate = true) const {
    std::vector<named<T>> result;
    for (const detail::member_slot& s : own_members())
      if (s.kind == member_kind::module &&
          (!remove_duplicate || std::none_of(result.begin(), result.end(), [&](const auto& c) { return &c.second == s.module; })))
        result.emplace_back(s.name, *s.module);
    return result;
  }

  template <class T>
  [[nodiscard]] std::vector<named<T>> collect_modules(std::string_view prefix, bool remove_duplicate) const {
    std::vector<named<T>> result;
    for_each_module(std::string(prefix), true, [&](const std::string& path, const Module& m) {
      result.emplace_back(path, const_cast<Module&>(m));
    }, remove_duplicate);
    return result;
  }

  template <class T>
  [[nodiscard]] static refs<T> values(const std::vector<named<T>>& items) {
    refs<T> result;
    result.reserve(items.size());
    for (const auto& item : items) result.emplace_back(item.second);
    return result;
  }

  /// "ResNet (the root)" or "Sequential 'layer1'": where a lookup failed.
  [[nodiscard]] static std::string describe(const Module& m, std::string_view path) {
    return std::string(m.type_name()) + (path.empty() ? " (the root)" : " '" + std::string(path) + "'");
  }

  /// Walks `path` down to the module owning its last component (and sets `leaf`); on failure returns
  /// nullptr and says why.
  [[nodiscard]] const Module* find_parent(std::string_view path, std::string_view& leaf, std::string& why) const {
    if (path.empty()) {
      why = "the path is empty";
      return nullptr;
    }
    const Module* m = this;
    std::size_t start = 0;
    for (std::size_t dot = path.find('.'); dot != std::string_view::npos; dot = path.find('.', start)) {
      const std::string_view part = path.substr(start, dot - start);
      const std::string_view walked = path.substr(0, start == 0 ? 0 : start - 1);
      if (part.empty()) {
        why = "empty component in the path";
        return nullptr;
      }
      const auto it = m->own_member(part);
      if (!it) {
        why = describe(*m, walked) + " has no attribute '" + std::string(part) + "'; '" + std::string(path) +
              "' is a path of attributes (a dot separates their names; no attribute name holds a dot)";
        return nullptr;
      }
      if (it->kind != member_kind::module) {
        why = "'" + std::string(path.substr(0, dot)) + "' is a " + std::string(to_string(it->kind)) + ", not a module";
        return nullptr;
      }
      m = it->module;
      start = dot + 1;
    }
    leaf = path.substr(start);
    if (leaf.empty()) {
      why = "empty component in the path";
      return nullptr;
    }
    return m;
  }

  [[nodiscard]] std::optional<detail::member_slot> find(std::string_view path, std::string& why) const {
    std::string_view leaf;
    const Module* parent = find_parent(path, leaf, why);
    if (parent == nullptr) return std::nullopt;
    if (auto slot = parent->own_member(leaf)) return slot;
    {
      const auto slots = parent->own_members();
      std::string known;
      for (const auto& s : slots) known += (known.empty() ? "" : ", ") + s.name;
      why = describe(*parent, path.substr(0, path.size() - leaf.size() - (path.size() > leaf.size() ? 1 : 0))) +
            " has no attribute '" + std::string(leaf) + "' (it has: " + (known.empty() ? "nothing" : known) + ")";
      return std::nullopt;
    }
  }

  [[nodiscard]] detail::member_slot find_or_throw(std::string_view path, std::string_view api) const {
    std::string why;
    auto slot = find(path, why);
    if (!slot) throw module_error(std::string(api) + "('" + std::string(path) + "'): " + why);
    return std::move(*slot);
  }

  /// The module that owns `path`'s last component (created attributes go there); throws.
  [[nodiscard]] Module& parent_or_throw(std::string_view path, std::string_view& leaf, std::string_view api) {
    std::string why;
    const Module* parent = find_parent(path, leaf, why);
    if (parent == nullptr) throw module_error(std::string(api) + "('" + std::string(path) + "'): " + why);
    return const_cast<Module&>(*parent);
  }

  [[nodiscard]] static bool valid_attribute_name(std::string_view name) {
    const auto word = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9');
    };
    return !name.empty() && std::all_of(name.begin(), name.end(), word) &&
           (!(name[0] >= '0' && name[0] <= '9') ||
            std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }));
  }

  /// The dynamic attribute `leaf` of this module, created if absent (after checking its name).
  detail::dynamic_attr* dynamic_slot(std::string_view leaf, std::string_view path, std::string_view api) {
    for (detail::dynamic_attr& d : dynamic_)
      if (d.name == leaf) return &d;
    if (!valid_attribute_name(leaf))
      throw module_error(std::string(api) + "('" + std::string(path) + "'): '" + std::string(leaf) +
                         "' is not a valid attribute name (an identifier, or digits for a container child)");
    return nullptr;
  }

  /// The owner of `path`'s last component (`leaf`), after checking that `module` may be stored there: the
  /// nesting depth, and the C++ type of a reflected member. Throws module_error.
  Module& check_set_module(std::string_view path, const Module& module, std::string_view& leaf);
  void set_module(std::string_view path, std::unique_ptr<Module> module);
  void repr_tree(std::string& out, std::size_t indent) const;
  void set_tensor(std::string_view path, member_kind kind, const Tensor& value);

  /// Replaces every tensor of the tree by a copy of its data (deep copy after a module copy).
  void detach_tensors();

  static HookHandle register_hook(detail::hook_records& records, std::pair<ForwardPreHook, ForwardHook> fns) {
    auto record = std::make_shared<detail::hook_record>();
    record->pre = std::move(fns.first);
    record->post = std::move(fns.second);
    records.push_back(record);
    return HookHandle(record);
  }

  std::vector<detail::dynamic_attr> dynamic_;
  struct flags {
    bool training = true;
    bool quantize_disabled = false;
  } flags_;
  detail::hook_slot hooks_;
};

inline std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }

namespace detail {

/// The library's access to Module's protected hooks (TM_MODULE's generated code and containers).
struct module_access {
  static std::unique_ptr<Module> copy(const Module& m) {
    const copy_scope scope;  // modules shared inside m stay shared inside the copy
    return m.tracemod_copy_();
  }
  static void detach_tensors(Module& m) { m.detach_tensors(); }
  static void set_training_flag(Module& m, bool training) { m.flags_.training = training; }
  static void copy_flags(const Module& from, Module& to) { to.flags_ = from.flags_; }
  /// m's forward hooks; null when it never had any (the one test a call without hooks makes).
  static const hook_list* hooks(const Module& m) noexcept { return m.hooks_.get(); }
  /// Gives `to` the hook registrations of `from` (trace_module: a traced module keeps the hooks of
  /// the module it stands for).
  static void share_hooks(const Module& from, Module& to) { to.hooks_ = from.hooks_; }
  /// Throws module_error if the tree below m nests deeper than max_module_depth.
  static void check_depth(const Module& m) { (void)m.height(); }
  /// Every direct child of m by name, a shared one under each of its names.
  static std::vector<std::pair<std::string, const Module&>> all_children(const Module& m) {
    return m.collect_children<const Module>(false);
  }
  /// The owning pointer of m's dynamic child `name` (null if it is none).
  static std::shared_ptr<Module> shared_child(const Module& m, std::string_view name) {
    for (const dynamic_attr& d : m.dynamic_)
      if (const auto* box = std::get_if<module_box>(&d.value); box != nullptr && d.name == name) return box->shared();
    return nullptr;
  }
  /// Adds the dynamic child `name` (a new attribute, checked as setattr checks it, else module_error)
  /// holding `child` itself (shared), as share_module does; the caller guarantees that `child` does
  /// not contain m.
  static void add_shared_child(Module& m, std::string name, std::shared_ptr<Module> child) {
    std::string_view leaf;
    (void)m.check_set_module(name, *child, leaf);  // the name and the nesting depth
    if (m.own_member(name))
      throw module_error("setattr('" + name + "'): " + std::string(m.type_name()) + " already has an attribute '" + name + "'");
    m.dynamic_.push_back({std::move(name), module_box(std::move(child))});
  }
  /// Moves the setattr children of m and of its reflected descendants into `out`.
  static void release_dynamic_children(Module& m, std::vector<std::shared_ptr<Module>>& out) {
    for (dynamic_attr& d : m.dynamic_)
      if (auto* box = std::get_if<module_box>(&d.value)) out.push_back(std::move(box->ptr_));
    std::vector<member_slot> reflected;
    m.tracemod_members_(reflected);  // nesting of reflected members is bounded by their C++ types
    for (const member_slot& s : reflected)
      if (s.kind == member_kind::module) release_dynamic_children(*s.module, out);
  }
};

}  // namespace detail

}  // namespace tracemod

// Out-of-line members, each in the header of its concern.
#include <tracemod/nn/module_clone.hpp>
#include <tracemod/nn/module_load_state.hpp>
#include <tracemod/nn/module_repr.hpp>
#include <tracemod/nn/module_setattr.hpp>
