// What a module member is: a child module, a parameter, a buffer, or an absent optional member.
#pragma once

#include <cstdint>
#include <string_view>

namespace tracemod {

enum class member_kind : std::uint8_t {
  module,     ///< a child module
  parameter,  ///< a tmod::Parameter
  buffer,     ///< a tmod::Buffer
  none,       ///< declared tmod::none_t: an optional member that is absent (PyTorch's `downsample = None`)
};

[[nodiscard]] constexpr std::string_view to_string(member_kind k) noexcept {
  switch (k) {
    case member_kind::module: return "module";
    case member_kind::parameter: return "parameter";
    case member_kind::buffer: return "buffer";
    case member_kind::none: return "none";
  }
  return "?";
}

}  // namespace tracemod
