// The state of a symbolic trace in progress: a stack of frames, one per (sub-)graph being traced.
// A frame numbers the calls recorded into its graph and knows the module whose forward it traces,
// through which attribute reads and sub-module calls get their names.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/tensor.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tracemod::trace::detail {

/// Resolves a tensor (by its buffer) or a module (by its address) reachable from the traced module
/// to its dotted attribute path; nullopt when there is no module (a traced lambda) or no such attribute.
struct attribute_finder {
  std::function<std::optional<std::string>(const Tensor&)> tensor;
  std::function<std::optional<std::string>(const void*)> module;
};

struct frame {
  attribute_finder find;
  std::uint32_t next_id = 0;
};

inline std::vector<frame>& frames() {
  thread_local std::vector<frame> stack;
  return stack;
}

/// Pushes a frame for the lifetime of the scope.
class frame_scope {
 public:
  explicit frame_scope(attribute_finder find = {}) { frames().push_back(frame{std::move(find), 0}); }
  frame_scope(const frame_scope&) = delete;
  frame_scope& operator=(const frame_scope&) = delete;
  ~frame_scope() { frames().pop_back(); }

  [[nodiscard]] std::uint32_t id_count() const { return frames().back().next_id; }
};

inline frame& current_frame(std::string_view what) {
  if (frames().empty())
    throw graph_error(std::string(what) +
                      ": symbolic tensors can only be combined while tmod::symbolic_trace runs a forward");
  return frames().back();
}

/// The id of the next call recorded in the current graph.
inline std::uint32_t next_call_id(std::string_view what) { return current_frame(what).next_id++; }

/// The attribute path of a tensor of the traced module, if it is one.
inline std::optional<std::string> tensor_path(const Tensor& t) {
  if (frames().empty() || !frames().back().find.tensor) return std::nullopt;
  return frames().back().find.tensor(t);
}

/// The attribute path of a sub-module of the traced module, if it is one.
inline std::optional<std::string> module_path(const void* module) {
  if (frames().empty() || !frames().back().find.module) return std::nullopt;
  return frames().back().find.module(module);
}

}  // namespace tracemod::trace::detail
