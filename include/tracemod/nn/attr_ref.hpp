// The result of Module::getattr: a reference to one attribute (module or tensor) with checked casts.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/tensor.hpp>
#include <tracemod/nn/member_kind.hpp>
#include <tracemod/nn/parameter.hpp>

#include <concepts>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace tracemod {

class Module;

/// Refers to the attribute found at `path()`; valid as long as the attribute is (a later setattr
/// or delattr on the module that owns it may invalidate it). ModuleT is Module or const Module.
template <class ModuleT>
class BasicAttrRef {
  template <class T>
  using like = std::conditional_t<std::is_const_v<ModuleT>, const T, T>;

 public:
  using tensor_type = like<Tensor>;

  BasicAttrRef(std::string path, member_kind kind, ModuleT* module, tensor_type* tensor)
      : path_(std::move(path)), kind_(kind), module_(module), tensor_(tensor) {}

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] member_kind kind() const noexcept { return kind_; }
  [[nodiscard]] bool is_module() const noexcept { return kind_ == member_kind::module; }
  [[nodiscard]] bool is_tensor() const noexcept {
    return kind_ == member_kind::parameter || kind_ == member_kind::buffer;
  }
  [[nodiscard]] bool is_none() const noexcept { return kind_ == member_kind::none; }

  [[nodiscard]] ModuleT& module() const {
    if (!is_module()) fail("a module");
    return *module_;
  }
  [[nodiscard]] tensor_type& tensor() const {
    if (!is_tensor()) fail("a tensor");
    return *tensor_;
  }
  [[nodiscard]] like<Parameter>& parameter() const {
    if (kind_ != member_kind::parameter) fail("a parameter");
    return static_cast<like<Parameter>&>(*tensor_);
  }
  [[nodiscard]] like<Buffer>& buffer() const {
    if (kind_ != member_kind::buffer) fail("a buffer");
    return static_cast<like<Buffer>&>(*tensor_);
  }

  /// Checked cast to a module class (the attribute's dynamic type must be, or derive from, T), or
  /// to Tensor, Parameter or Buffer. Throws module_error naming the path and what it really is.
  template <class T>
  [[nodiscard]] like<T>& as() const {
    if constexpr (std::same_as<T, Tensor>) {
      return tensor();
    } else if constexpr (std::same_as<T, Parameter>) {
      return parameter();
    } else if constexpr (std::same_as<T, Buffer>) {
      return buffer();
    } else {
      static_assert(std::derived_from<T, Module>,
                    "tmod::AttrRef::as<T>: T must be a module class, tmod::Tensor, tmod::Parameter or tmod::Buffer");
      auto* p = is_module() ? dynamic_cast<like<T>*>(module_) : nullptr;
      if (p == nullptr) {
        if constexpr (requires { T::tracemod_type_name; })
          fail("a " + std::string(T::tracemod_type_name));
        else
          fail("of the requested module class");
      }
      return *p;
    }
  }

 private:
  [[noreturn]] void fail(const std::string& wanted) const {
    std::string actual;
    switch (kind_) {
      case member_kind::module: actual = "a " + std::string(module_->type_name()) + " module"; break;
      case member_kind::parameter: actual = "a parameter"; break;
      case member_kind::buffer: actual = "a buffer"; break;
      case member_kind::none: actual = "none (an absent optional member)"; break;
    }
    throw module_error("getattr('" + path_ + "'): the attribute is " + actual + ", not " + wanted);
  }

  std::string path_;
  member_kind kind_;
  ModuleT* module_;
  tensor_type* tensor_;
};

using AttrRef = BasicAttrRef<Module>;
using ConstAttrRef = BasicAttrRef<const Module>;

}  // namespace tracemod
