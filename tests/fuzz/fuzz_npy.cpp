// libFuzzer target for the .npy parser: any input must parse or raise format_error (or another
// tmod::error), never crash, leak or allocate beyond the input's size.
#include <tracemod/io/npy.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)tracemod::io::parse_npy(std::as_bytes(std::span(data, size)));
  } catch (const tracemod::error&) {
  }
  return 0;
}
