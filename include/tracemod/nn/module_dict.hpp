// ModuleDict<T, More...>: modules by string key, in insertion order (PyTorch's and MegEngine's
// nn.ModuleDict). Each key is a child's attribute name, so paths and state_dict keys read
// "blocks.conv.weight". ModuleDict<T> holds modules of one class; a dict of several classes holds
// each as a ModuleVariant<T, More...> (nn/module_variant.hpp), which calls the module it holds. It
// has no forward: a parent's forward looks modules up by key or loops over them. Not builtin.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/nn/module_variant.hpp>
#include <tracemod/nn/reflection.hpp>

#include <boost/hana/tuple.hpp>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tracemod::nn {

template <class T, class... More>
class ModuleDict : public Module {
  static_assert((reflected_module<T> && ... && reflected_module<More>),
                "tmod::nn::ModuleDict<T, More...>: every element class must be a module class that declares TM_MODULE");

 public:
  /// T, or ModuleVariant<T, More...> for a dict of several classes.
  using value_type = detail::container_element_t<T, More...>;
  using entry = std::pair<std::string, value_type>;
  using const_iterator = typename std::vector<entry>::const_iterator;

  ModuleDict() = default;
  /// {{"conv", M::Conv2d(...)}, {"act", M::ReLU{}}}: keys in this order; a repeated key throws.
  ModuleDict(std::initializer_list<entry> items) {
    for (const entry& e : items) insert(e.first, e.second);
  }

  /// No members known at compile time: the entries are run-time children.
  static constexpr auto tracemod_members() { return boost::hana::tuple<>{}; }
  TRACEMOD_DETAIL_MODULE_BASICS(ModuleDict, "ModuleDict", false)

  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
  [[nodiscard]] bool contains(std::string_view key) const noexcept { return find(key) != items_.end(); }

  /// The module under `key`; throws module_error naming the key, the dict and its keys.
  [[nodiscard]] value_type& operator[](std::string_view key) { return at(key); }
  [[nodiscard]] const value_type& operator[](std::string_view key) const { return at(key); }
  [[nodiscard]] value_type& at(std::string_view key) { return const_cast<value_type&>(std::as_const(*this).at(key)); }
  [[nodiscard]] const value_type& at(std::string_view key) const {
    const auto it = find(key);
    if (it == items_.end()) throw missing(key, "has no key");
    return it->second;
  }

  /// Adds `module` under a new `key` (last in order); throws module_error if the key is taken or is
  /// not an attribute name (an identifier, or digits).
  void insert(std::string_view key, value_type module) {
    check_key(key);
    if (contains(key)) throw module_error(detail::describe_container(*this) + ": key '" + std::string(key) + "' is already taken");
    items_.emplace_back(std::string(key), std::move(module));
  }
  /// Replaces the module under `key` in place, or adds it last (PyTorch's `d[key] = m`).
  void insert_or_assign(std::string_view key, value_type module) {
    check_key(key);
    if (const auto it = find(key); it != items_.end())
      items_[static_cast<std::size_t>(it - items_.begin())].second = std::move(module);
    else
      items_.emplace_back(std::string(key), std::move(module));
  }
  /// insert_or_assign of every entry, in order (PyTorch's update). Every key is checked first, so a
  /// bad key changes nothing.
  void update(const std::vector<entry>& items) {
    for (const entry& e : items) check_key(e.first);
    for (const entry& e : items) insert_or_assign(e.first, e.second);
  }
  void update(std::initializer_list<entry> items) { update(std::vector<entry>(items)); }
  /// Removes the module under `key` and returns it; throws module_error if there is none.
  value_type pop(std::string_view key) {
    const auto it = find(key);
    if (it == items_.end()) throw missing(key, "cannot pop key");
    const auto pos = items_.begin() + (it - items_.begin());
    value_type module = std::move(pos->second);
    items_.erase(pos);
    return module;
  }
  void clear() noexcept { items_.clear(); }

  [[nodiscard]] std::vector<std::string> keys() const {
    std::vector<std::string> k;
    k.reserve(items_.size());
    for (const entry& e : items_) k.push_back(e.first);
    return k;
  }
  [[nodiscard]] std::vector<std::reference_wrapper<const value_type>> values() const {
    std::vector<std::reference_wrapper<const value_type>> v;
    v.reserve(items_.size());
    for (const entry& e : items_) v.emplace_back(e.second);
    return v;
  }
  /// The (key, module) entries in order; iterating the dict gives the same.
  [[nodiscard]] const std::vector<entry>& items() const noexcept { return items_; }
  [[nodiscard]] const_iterator begin() const noexcept { return items_.begin(); }
  [[nodiscard]] const_iterator end() const noexcept { return items_.end(); }

 private:
  void tracemod_members_(std::vector<tracemod::detail::member_slot>& out) const override {
    for (const entry& e : items_)
      out.push_back({e.first, member_kind::module, const_cast<Module*>(&detail::element_module(e.second)), nullptr, true});
  }

  [[nodiscard]] const_iterator find(std::string_view key) const noexcept {
    return std::find_if(items_.begin(), items_.end(), [&](const entry& e) { return e.first == key; });
  }

  [[nodiscard]] module_error missing(std::string_view key, std::string_view what) const {
    std::string known;
    for (const entry& e : items_) known += (known.empty() ? "'" : ", '") + e.first + "'";
    return module_error(detail::describe_container(*this) + " " + std::string(what) + " '" + std::string(key) +
                        "' (its keys: " + (known.empty() ? "none" : known) + ")");
  }

  /// A key is a child's attribute name: an identifier, or digits (it cannot hold a dot).
  void check_key(std::string_view key) const {
    const auto word = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9');
    };
    const auto digit = [](char c) { return c >= '0' && c <= '9'; };
    const bool ok = !key.empty() && std::all_of(key.begin(), key.end(), word) &&
                    (!digit(key.front()) || std::all_of(key.begin(), key.end(), digit));
    if (!ok)
      throw module_error(detail::describe_container(*this) + ": key '" + std::string(key) +
                         "' is not an attribute name (an identifier, or digits; it names the child in paths such as "
                         "'blocks.key.weight')");
  }

  std::vector<entry> items_;
};

}  // namespace tracemod::nn
