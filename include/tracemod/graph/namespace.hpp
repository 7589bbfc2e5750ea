// The names of one graph (MegEngine's NameSpace): node names and the names of the sub-graphs it
// calls share it. A name is made an identifier (runs of other characters become `_`, a leading digit
// gets a `_` prefix), and a taken name or a C++ keyword gets a `_1`, `_2`, ... suffix.
#pragma once

#include <algorithm>
#include <cctype>
#include <iterator>
#include <optional>
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
    if (taken(name) || is_reserved(name)) name = first_free_after(name, owner != nullptr);
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
    if (const auto numbered = split_numbered(name); numbered && numbered->number >= 1) {
      if (const auto low = lowest_free_.find(std::string(numbered->stem)); low != lowest_free_.end())
        low->second = std::min(low->second, numbered->number);
    }
  }
  [[nodiscard]] bool taken(const std::string& name) const {
    const auto it = used_.find(name);
    return it != used_.end() && it->second != nullptr;
  }
  [[nodiscard]] const void* owner_of(const std::string& name) const {
    const auto it = used_.find(name);
    return it == used_.end() ? nullptr : it->second;
  }
  void clear() {
    used_.clear();
    lowest_free_.clear();
  }
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
  /// Suffixes count up to this one (18 digits); a name ending in it gets `_1` like any other.
  static constexpr long long last_counted = 100'000'000'000'000'000;

  /// `stem_number`, the number written without leading zeros.
  struct Numbered {
    std::string_view stem;
    long long number;
  };
  /// `add_out_12` -> {add_out, 12}; nothing for `add_out`, `x_01` or a number past last_counted.
  static std::optional<Numbered> split_numbered(std::string_view name) {
    const auto us = name.rfind('_');
    if (us == std::string_view::npos || us + 1 == name.size() || name.size() - us - 1 > 18 ||
        (name[us + 1] == '0' && us + 2 < name.size()))
      return std::nullopt;
    long long number = 0;
    for (const char c : name.substr(us + 1)) {
      if (std::isdigit(static_cast<unsigned char>(c)) == 0) return std::nullopt;
      number = number * 10 + (c - '0');
    }
    if (number > last_counted) return std::nullopt;
    return Numbered{name.substr(0, us), number};
  }

  /// The first free name of the sequence that follows `name` (taken or reserved): `bump(name)`,
  /// `bump(bump(name))`, ... Past its first step the sequence is `stem_k` for k = first, first + 1, ...,
  /// up to last_counted; lowest_free_[stem] is a k below which every `stem_k` (k >= 1) is taken, so the
  /// search starts there when it may, and moves it past the name found when `claims`.
  std::string first_free_after(const std::string& name, bool claims) {
    std::string next = bump(name);
    const auto numbered = split_numbered(next);
    if (!numbered) return linear_search(std::move(next));
    auto& low = lowest_free_.try_emplace(std::string(numbered->stem), 1).first->second;
    const bool from_low = numbered->number <= low && low <= last_counted;
    long long k = from_low ? low : numbered->number;
    const std::size_t stem_size = numbered->stem.size() + 1;  // numbered->stem dies with `next`
    next.resize(stem_size);
    next += std::to_string(k);
    while (taken(next)) {
      if (k == last_counted) return linear_search(std::move(next));
      next.resize(stem_size);
      next += std::to_string(++k);
    }
    if (from_low) low = claims ? k + 1 : k;
    return next;
  }

  /// The first free name of `name`, `bump(name)`, ... tried one by one.
  std::string linear_search(std::string name) const {
    while (taken(name) || is_reserved(name)) name = bump(name);
    return name;
  }

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
  std::unordered_map<std::string, long long> lowest_free_;  // see first_free_after
};

}  // namespace tracemod::graph
