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
      if (const auto low = lowest_free_.find(numbered->stem); low != lowest_free_.end())
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
    std::string stem;
    long long number;
  };
  /// `add_out_12` -> {add_out, 12}; nothing for `add_out`, `x_01` or a number past last_counted.
  static std::optional<Numbered> split_numbered(const std::string& name) {
    const auto us = name.rfind('_');
    if (us == std::string::npos || us + 1 == name.size() || name.size() - us - 1 > 18 ||
        (name[us + 1] == '0' && us + 2 < name.size()))
      return std::nullopt;
    long long number = 0;
    for (std::size_t i = us + 1; i < name.size(); ++i) {
      if (std::isdigit(static_cast<unsigned char>(name[i])) == 0) return std::nullopt;
      number = number * 10 + (name[i] - '0');
    }
    if (number > last_counted) return std::nullopt;
    return Numbered{name.substr(0, us), number};
  }

  /// The name tried after `name`, as {stem, number}: `add_out` -> {add_out, 1}, `add_out_1` ->
  /// {add_out, 2}, `x_01` -> {x, 2}; a suffix of 18 digits or more is not counted up.
  static Numbered successor(const std::string& name) {
    const auto us = name.rfind('_');
    if (us != std::string::npos && us + 1 < name.size() && name.size() - us - 1 < 18 &&
        std::all_of(name.begin() + static_cast<std::ptrdiff_t>(us) + 1, name.end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }))
      return {name.substr(0, us), std::stoll(name.substr(us + 1)) + 1};
    return {name, 1};
  }
  /// `add_out` -> `add_out_1`, `add_out_1` -> `add_out_2`.
  static std::string bump(const std::string& name) {
    const Numbered next = successor(name);
    return next.stem + '_' + std::to_string(next.number);
  }

  /// The first free name among `bump(name)`, `bump(bump(name))`, ...: `stem_k` for k = first,
  /// first + 1, ... up to last_counted. Every `stem_k` with 1 <= k < lowest_free_[stem] is taken, so
  /// the search starts there when first is below it and moves it past the name found when `claims`:
  /// N fresh `add_out` names try N names, not N * N / 2. Releasing `stem_k` lowers it to k, so the
  /// search after the one that reuses `stem_k` walks the taken names above k again.
  std::string first_free_after(const std::string& name, bool claims) {
    const Numbered first = successor(name);
    auto& low = lowest_free_.try_emplace(first.stem, 1).first->second;
    const bool from_low = first.number <= low && low <= last_counted;
    long long k = from_low ? low : first.number;
    std::string next = first.stem + '_';
    const std::size_t stem_size = next.size();
    next += std::to_string(k);
    while (taken(next)) {
      if (k == last_counted) {
        while (taken(next)) next = bump(next);  // `stem_100000000000000000_1`, ...
        return next;
      }
      next.resize(stem_size);
      next += std::to_string(++k);
    }
    if (from_low) low = claims ? k + 1 : k;
    return next;
  }

  std::unordered_map<std::string, const void*> used_;
  std::unordered_map<std::string, long long> lowest_free_;  // see first_free_after
};

}  // namespace tracemod::graph
