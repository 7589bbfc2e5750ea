// Module::clone: a deep copy, the module tree copied and every tensor given its own buffer.
#pragma once

#include <tracemod/nn/module.hpp>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

namespace tracemod {

inline std::unique_ptr<Module> Module::clone() const {
  detail::module_access::check_depth(*this);  // the copy recurses once per level
  std::unique_ptr<Module> copy = detail::module_access::copy(*this);
  copy->detach_tensors();
  return copy;
}

// Tensors that were one handle (shared storage, same shape and dtype) stay one handle in the copy.
inline void Module::detach_tensors() {
  std::vector<std::pair<Tensor, Tensor>> copied;  // original handle -> its copy
  for (auto& entry : named_tensors()) {
    Tensor& t = entry.second;
    const auto same = [&](const auto& seen) {
      return seen.first.shares_storage_with(t) && seen.first.shape() == t.shape() && seen.first.dtype() == t.dtype();
    };
    const auto it = std::find_if(copied.begin(), copied.end(), same);
    Tensor copy = it != copied.end() ? it->second : t.clone();
    if (it == copied.end()) copied.emplace_back(t, copy);
    t = std::move(copy);
  }
}

}  // namespace tracemod
