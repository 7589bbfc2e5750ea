// Module::repr: the module tree printed as PyTorch prints it (`Net(\n  (fc): Linear(...)\n)`).
#pragma once

#include <tracemod/nn/module.hpp>

#include <cstddef>
#include <string>

namespace tracemod {

inline std::string Module::repr() const {
  detail::module_access::check_depth(*this);  // repr_tree recurses once per level
  std::string out;
  repr_tree(out, 0);
  return out;
}

// Appends the tree at the given indent; each line is written once, already indented, so the cost is
// the size of the text (re-indenting children's text would be cubic in the depth).
inline void Module::repr_tree(std::string& out, std::size_t indent) const {
  const auto new_line = [&](std::size_t width) {
    out += '\n';
    out.append(width, ' ');
  };
  out += type_name();
  out += '(';
  const std::string extra = extra_repr();
  const auto children = collect_children<const Module>(false);  // a shared child under each name, as PyTorch prints
  if (children.empty()) {
    out += extra;
    out += ')';
    return;
  }
  if (!extra.empty()) {
    new_line(indent + 2);
    for (const char c : extra) c == '\n' ? new_line(indent + 2) : void(out += c);
  }
  for (const auto& [name, child] : children) {
    new_line(indent + 2);
    out += "(" + name + "): ";
    child.repr_tree(out, indent + 2);
  }
  new_line(indent);
  out += ')';
}

}  // namespace tracemod
