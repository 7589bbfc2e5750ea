// ModuleList<T, More...>: a run-time sized list of modules, children named "0", "1", ...
// (PyTorch's nn.ModuleList). ModuleList<T> holds modules of one class, as T; a list of several
// classes holds each as a ModuleVariant<T, More...> (nn/module_variant.hpp), which calls the module
// it holds. It has no forward: a parent's forward loops over it or indexes it. Not builtin.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/nn/module_variant.hpp>
#include <tracemod/nn/reflection.hpp>

#include <boost/hana/tuple.hpp>

#include <cstddef>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace tracemod::nn {

template <class T, class... More>
class ModuleList : public Module {
  static_assert((reflected_module<T> && ... && reflected_module<More>),
                "tmod::nn::ModuleList<T, More...>: every element class must be a module class that declares TM_MODULE");

 public:
  /// T, or ModuleVariant<T, More...> for a list of several classes.
  using value_type = detail::container_element_t<T, More...>;
  using iterator = typename std::vector<value_type>::iterator;
  using const_iterator = typename std::vector<value_type>::const_iterator;

  ModuleList() = default;
  ModuleList(std::initializer_list<value_type> modules) : items_(modules) {}
  explicit ModuleList(std::vector<value_type> modules) : items_(std::move(modules)) {}

  /// No members known at compile time: the elements are run-time children.
  static constexpr auto tracemod_members() { return boost::hana::tuple<>{}; }
  TRACEMOD_DETAIL_MODULE_BASICS(ModuleList, "ModuleList", false)

  void append(value_type module) { items_.push_back(std::move(module)); }
  /// Appends every module of `modules` (PyTorch's extend).
  void extend(std::vector<value_type> modules) {
    items_.insert(items_.end(), std::make_move_iterator(modules.begin()), std::make_move_iterator(modules.end()));
  }
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }

  /// Unchecked access (std::vector's operator[]).
  [[nodiscard]] value_type& operator[](std::size_t i) noexcept { return items_[i]; }
  [[nodiscard]] const value_type& operator[](std::size_t i) const noexcept { return items_[i]; }
  /// Bounds-checked access; throws module_error naming the list and the index.
  [[nodiscard]] value_type& at(std::size_t i) { return items_[checked(i)]; }
  [[nodiscard]] const value_type& at(std::size_t i) const { return items_[checked(i)]; }

  [[nodiscard]] iterator begin() noexcept { return items_.begin(); }
  [[nodiscard]] iterator end() noexcept { return items_.end(); }
  [[nodiscard]] const_iterator begin() const noexcept { return items_.begin(); }
  [[nodiscard]] const_iterator end() const noexcept { return items_.end(); }

 private:
  void tracemod_members_(std::vector<tracemod::detail::member_slot>& out) const override {
    for (std::size_t i = 0; i < items_.size(); ++i)
      out.push_back({std::to_string(i), member_kind::module, const_cast<Module*>(&detail::element_module(items_[i])),
                     nullptr, true});
  }

  [[nodiscard]] std::size_t checked(std::size_t i) const {
    if (i >= items_.size())
      throw module_error(detail::describe_container(*this) + ": index " + std::to_string(i) + " is out of range for " +
                         std::to_string(items_.size()) + " module" + (items_.size() == 1 ? "" : "s"));
    return i;
  }

  std::vector<value_type> items_;
};

}  // namespace tracemod::nn
