// The dynamic attributes of a module: setattr of a child module or tensor by dotted path, delattr,
// share_module, and the boxes holding dynamic children. (Reading them is part of Module's traversal.)
#pragma once

#include <tracemod/nn/module.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tracemod {

namespace detail {

inline module_box::module_box(std::unique_ptr<Module> m) : ptr_(std::move(m)) {}
inline module_box::module_box(const module_box& other) {
  const copy_scope scope;
  if (other.ptr_.use_count() > 1) {  // shared: copied once per copy
    auto& memo = copy_memo::current().copies;
    for (const auto& [original, copy] : memo)
      if (original == other.ptr_.get()) {
        ptr_ = copy;
        return;
      }
    ptr_ = std::shared_ptr<Module>(module_access::copy(*other.ptr_));
    memo.emplace_back(other.ptr_.get(), ptr_);
  } else {
    ptr_ = module_access::copy(*other.ptr_);
  }
}
inline module_box& module_box::operator=(const module_box& other) {
  if (this != &other) {
    module_box copy(other);
    ptr_ = std::move(copy.ptr_);
  }
  return *this;
}
// Tears the subtree down iteratively: a long chain of setattr children must not recurse once per level.
// A module another attribute still holds is only released, not torn down.
inline module_box::~module_box() {
  std::vector<std::shared_ptr<Module>> pending;
  pending.push_back(std::move(ptr_));
  while (!pending.empty()) {
    std::shared_ptr<Module> m = std::move(pending.back());
    pending.pop_back();
    if (m && m.use_count() == 1) module_access::release_dynamic_children(*m, pending);
  }
}

}  // namespace detail

inline void Module::delattr(std::string_view path) {
  std::string_view leaf;
  Module& parent = parent_or_throw(path, leaf, "delattr");
  const auto it =
      std::find_if(parent.dynamic_.begin(), parent.dynamic_.end(), [&](const auto& d) { return d.name == leaf; });
  if (it != parent.dynamic_.end()) {
    parent.dynamic_.erase(it);
    return;
  }
  const std::string prefix = "delattr('" + std::string(path) + "'): ";
  for (const auto& s : parent.own_members())
    if (s.name == leaf)
      throw module_error(prefix + "'" + std::string(leaf) + "' is a reflected member of " +
                         std::string(parent.type_name()) +
                         " (listed in TM_MODULE); only attributes added with setattr can be deleted");
  throw module_error(prefix + std::string(parent.type_name()) + " has no attribute '" + std::string(leaf) + "'");
}

inline void Module::share_module(std::string_view alias_path, std::string_view target_path) {
  const std::string prefix = "share_module('" + std::string(alias_path) + "', '" + std::string(target_path) + "'): ";
  std::string why;
  const auto target = find(target_path, why);
  if (!target) throw module_error(prefix + "the target '" + std::string(target_path) + "' is missing: " + why);
  if (target->kind != member_kind::module)
    throw module_error(prefix + "'" + std::string(target_path) + "' is a " + std::string(to_string(target->kind)) +
                       ", not a module");
  if (target->reflected)
    throw module_error(prefix + "'" + std::string(target_path) + "' is a reflected member (listed in TM_MODULE), held " +
                       "by value; only a module added with setattr can be shared");
  std::string_view leaf;
  const Module* parent = find_parent(alias_path, leaf, why);
  if (parent == nullptr) throw module_error(prefix + "the alias path '" + std::string(alias_path) + "': " + why);
  // The alias's owner must not lie inside the target: the module would contain itself.
  for (const auto& [path, m] : target->module->named_modules(std::string(target_path)))
    if (&m == parent)
      throw module_error(prefix + "'" + std::string(alias_path) + "' would lie inside '" + std::string(target_path) +
                         "' itself (its owner '" + path + "' is the target or a descendant of it): a module cannot " +
                         "contain itself");
  Module& owner = const_cast<Module&>(*parent);
  for (const auto& s : owner.own_members())
    if (s.name == leaf && s.reflected)
      throw module_error(prefix + "'" + std::string(leaf) + "' is a reflected member of " +
                         std::string(owner.type_name()) + " (listed in TM_MODULE); a C++ member cannot become " +
                         "another object, so an alias is a dynamic attribute (choose a name not in TM_MODULE)");
  std::string_view unused;
  (void)check_set_module(alias_path, *target->module, unused);  // the nesting depth and the alias's name
  const detail::dynamic_attr* source = nullptr;
  std::string_view target_leaf;
  const Module* target_owner = find_parent(target_path, target_leaf, why);
  for (const detail::dynamic_attr& d : target_owner->dynamic_)
    if (d.name == target_leaf) source = &d;
  detail::module_box box(std::get<detail::module_box>(source->value).shared());
  if (detail::dynamic_attr* d = owner.dynamic_slot(leaf, alias_path, "share_module"))
    d->value = std::move(box);
  else
    owner.dynamic_.push_back({std::string(leaf), std::move(box)});
}

inline Module& Module::check_set_module(std::string_view path, const Module& module, std::string_view& leaf) {
  Module& parent = parent_or_throw(path, leaf, "setattr");
  const std::string prefix = "setattr('" + std::string(path) + "'): ";
  const auto depth = static_cast<std::size_t>(std::count(path.begin(), path.end(), '.')) + 1;
  if (const std::size_t height = module.height(); depth + height > max_module_depth)
    throw module_error(prefix + "the " + std::string(module.type_name()) + " module, " + std::to_string(height) +
                       " levels deep, would nest below depth " + std::to_string(depth) + ", beyond max_module_depth (" +
                       std::to_string(max_module_depth) + ")");
  for (const auto& s : parent.own_members()) {
    if (s.name != leaf || !s.reflected) continue;
    if (s.kind != member_kind::module)
      throw module_error(prefix + "the reflected member is a " + std::string(to_string(s.kind)) +
                         "; it cannot hold a " + std::string(module.type_name()) + " module");
    const Module& current = *s.module;
    if (typeid(current) != typeid(module))
      throw module_error(prefix + "the reflected member is a " + std::string(s.module->type_name()) +
                         " and its C++ type is fixed; it cannot hold a " + std::string(module.type_name()));
    return parent;
  }
  (void)parent.dynamic_slot(leaf, path, "setattr");  // checks the name of a new attribute
  return parent;
}

inline void Module::set_module(std::string_view path, std::unique_ptr<Module> module) {
  std::string_view leaf;
  Module& parent = check_set_module(path, *module, leaf);
  for (const auto& s : parent.own_members()) {
    if (s.name != leaf || !s.reflected) continue;
    s.module->tracemod_assign_(std::move(*module));
    return;
  }
  if (detail::dynamic_attr* d = parent.dynamic_slot(leaf, path, "setattr"))
    d->value = detail::module_box(std::move(module));
  else
    parent.dynamic_.push_back({std::string(leaf), detail::module_box(std::move(module))});
}

inline void Module::set_tensor(std::string_view path, member_kind kind, const Tensor& value) {
  std::string_view leaf;
  Module& parent = parent_or_throw(path, leaf, "setattr");
  for (const auto& s : parent.own_members()) {
    if (s.name != leaf || !s.reflected) continue;
    if (s.kind != member_kind::parameter && s.kind != member_kind::buffer)
      throw module_error("setattr('" + std::string(path) + "'): the reflected member is " +
                         (s.kind == member_kind::module ? "a " + std::string(s.module->type_name()) + " module"
                                                        : std::string("declared tmod::none_t")) +
                         "; it cannot hold a tensor");
    *s.tensor = value;  // a reflected member keeps its kind
    return;
  }
  auto tensor = kind == member_kind::parameter ? decltype(detail::dynamic_attr::value)(Parameter(value))
                                               : decltype(detail::dynamic_attr::value)(Buffer(value));
  if (detail::dynamic_attr* d = parent.dynamic_slot(leaf, path, "setattr"))
    d->value = std::move(tensor);
  else
    parent.dynamic_.push_back({std::string(leaf), std::move(tensor)});
}

}  // namespace tracemod
