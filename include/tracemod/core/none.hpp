// tmod::none: an absent optional argument (MegEngine's None), e.g. conv2d without bias.
#pragma once

namespace tracemod {

struct none_t {
  friend constexpr bool operator==(none_t, none_t) noexcept { return true; }
};
inline constexpr none_t none{};

}  // namespace tracemod
