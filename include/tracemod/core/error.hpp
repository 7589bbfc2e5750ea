// Exception hierarchy: every failure the library reports derives from tracemod::error.
#pragma once

#include <stdexcept>
#include <string>

namespace tracemod {

/// Base of every exception thrown by tracemod.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Shapes that do not fit an op (un-broadcastable, channel mismatch, bad reshape, ...).
class shape_error : public error {
 public:
  using error::error;
};

/// A tensor of a dtype the op does not accept.
class dtype_error : public error {
 public:
  using error::error;
};

/// Malformed serialized data (.npy headers, saved modules).
class format_error : public error {
 public:
  using error::error;
};

/// An argument value outside its domain (negative stride, bad axis, unknown mode, ...).
class value_error : public error {
 public:
  using error::error;
};

/// Invalid graph structure or surgery request (unknown ids, dangling nodes, ...).
class graph_error : public error {
 public:
  using error::error;
};

/// Module attribute/state problems (unknown attribute path, state_dict mismatch, ...).
class module_error : public error {
 public:
  using error::error;
};

}  // namespace tracemod
