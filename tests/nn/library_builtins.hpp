// The builtin module classes of the library, read from its headers' source (every line that opens
// with TM_BUILTIN_MODULE(Class): how a module declares itself builtin), independently of the
// registry the macro fills.
#pragma once

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>

namespace library_builtins {

inline std::set<std::string> declared_in_headers() {
  constexpr std::string_view macro = "TM_BUILTIN_MODULE(";
  std::set<std::string> names;
  const std::filesystem::path root = std::filesystem::path(TRACEMOD_TEST_DATA_DIR) / ".." / ".." / "include";
  for (const auto& file : std::filesystem::recursive_directory_iterator(root)) {
    if (file.path().extension() != ".hpp") continue;
    std::ifstream in(file.path());
    for (std::string line; std::getline(in, line);) {
      const std::size_t start = line.find_first_not_of(' ');
      if (start == std::string::npos || line.compare(start, macro.size(), macro) != 0) continue;
      const std::size_t name = start + macro.size();
      names.insert(line.substr(name, line.find_first_of(",)", name) - name));
    }
  }
  return names;
}

}  // namespace library_builtins
