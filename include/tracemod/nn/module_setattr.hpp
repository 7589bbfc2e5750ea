// The dynamic attributes of a module: setattr of a child module or tensor by dotted path, and
// delattr. (Reading them is part of Module's traversal.)
#pragma once

#include <tracemod/nn/module.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace tracemod {


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
