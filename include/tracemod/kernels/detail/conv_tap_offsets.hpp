// The tap offsets of the direct convolution kernels (depthwise, few-channel direct): where tap
// (ci, ry, sx) of an output is, relative to the output's origin in the kernel's copy of the input.
#pragma once

#include <cstdint>
#include <vector>

namespace tracemod::kernels::detail {

/// The offsets of `channels` x r x s taps from an output's origin in one layout: tap (ci, ry, sx),
/// at (ci * r + ry) * s + sx, is offset(ci, ry, sx). `key` is what the offsets depend on besides
/// the taps' extents (the window, the layout's sizes; compared with ==). Kept per thread and per
/// call site (the type of `offset`), and recomputed only when the key or the extents change, so a
/// call allocates nothing. Valid until the next call from the same site on the same thread.
template <class Key, class Offset>
inline const std::int64_t* conv_tap_offsets(const Key& key, std::int64_t channels, std::int64_t r, std::int64_t s,
                                            const Offset& offset) {
  struct table {
    Key key{};
    std::int64_t channels = 0, r = 0, s = 0;
    std::vector<std::int64_t> offsets;
  };
  thread_local table cached;
  if (cached.offsets.empty() || !(cached.key == key) || cached.channels != channels || cached.r != r ||
      cached.s != s) {
    cached.key = key;
    cached.channels = channels;
    cached.r = r;
    cached.s = s;
    cached.offsets.resize(static_cast<std::size_t>(channels * r * s));
    for (std::int64_t ci = 0; ci < channels; ++ci)
      for (std::int64_t ry = 0; ry < r; ++ry)
        for (std::int64_t sx = 0; sx < s; ++sx)
          cached.offsets[static_cast<std::size_t>((ci * r + ry) * s + sx)] = offset(ci, ry, sx);
  }
  return cached.offsets.data();
}

}  // namespace tracemod::kernels::detail
