// The names of one graph (MegEngine's NameSpace): node names and the names of the sub-graphs it
// calls share it. A name is made an identifier (runs of other characters become `_`, a leading digit
// gets a `_` prefix), and a taken name or a C++ keyword gets a `_1`, `_2`, ... suffix.
#pragma once

#include <algorithm>
#include <iterator>
#include <cctype>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tracemod::graph {

class NameSpace {
 public:
  /// A unique identifier derived from `base`, now associated with `owner` (a node or graph).
  /// If `base` is already associated with `owner`, it is returned unchanged.
  std::string create_unique_name(std::string_view base, const void* owner) {
    std::string name = sanitize(base);
    if (const auto it = used_.find(name); it != used_.end() && it->second == owner && owner != nullptr) return name;
    while (taken(name) || is_reserved(name)) name = bump(name);
    used_[name] = owner;
    return name;
  }
  /// Associates an exact name (already unique) with `owner`; false if it is taken.
  bool claim(const std::string& name, const void* owner) {
    if (taken(name)) return false;
    used_[name] = owner;
    return true;
  }
  /// Frees a name (its owner is gone or renamed).
  void release(const std::string& name) {
    if (const auto it = used_.find(name); it != used_.end()) it->second = nullptr;
  }
  [[nodiscard]] bool taken(const std::string& name) const {
    const auto it = used_.find(name);
    return it != used_.end() && it->second != nullptr;
  }
  [[nodiscard]] const void* owner_of(const std::string& name) const {
    const auto it = used_.find(name);
    return it == used_.end() ? nullptr : it->second;
  }
  void clear() { used_.clear(); }
  [[nodiscard]] const std::unordered_map<std::string, const void*>& entries() const noexcept { return used_; }

  /// `a.b` -> `a_b`, `0` -> `_0`, `` -> `_`.
  [[nodiscard]] static std::string sanitize(std::string_view s) {
    std::string out;
    bool in_run = false;
    for (char c : s) {
      const bool word = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
      if (word) {
        out += c;
        in_run = false;
      } else if (!in_run) {
        out += '_';
        in_run = true;
      }
    }
    if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])) != 0) out.insert(out.begin(), '_');
    return out;
  }

  /// C++ keywords (and a few names that would read badly as values).
  [[nodiscard]] static bool is_reserved(std::string_view name) {
    static constexpr std::string_view words[] = {
        "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
        "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
        "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete",
        "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
        "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
        "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
        "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct",
        "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
        "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq"};
    return std::find(std::begin(words), std::end(words), name) != std::end(words) || name == "inf" || name == "nan";
  }

 private:
  /// `add_out` -> `add_out_1`, `add_out_1` -> `add_out_2`.
  static std::string bump(const std::string& name) {
    const auto us = name.rfind('_');
    if (us != std::string::npos && us + 1 < name.size() &&
        std::all_of(name.begin() + static_cast<std::ptrdiff_t>(us) + 1, name.end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }) &&
        name.size() - us - 1 < 18)
      return name.substr(0, us + 1) + std::to_string(std::stoll(name.substr(us + 1)) + 1);
    return name + "_1";
  }

  std::unordered_map<std::string, const void*> used_;
};

}  // namespace tracemod::graph
