// libFuzzer target for tmod::load: any input must load or raise format_error, never crash, leak or
// grow memory without bound. The checksums are recomputed over the mutated bytes (and the tensor
// checksums skipped) so that mutations reach the description parser and the graph rebuilding
// instead of stopping at a checksum mismatch. A loaded module is also run on zero inputs of its
// graph's input shapes (when small), which must compute or raise a tmod::error.
#include <tracemod/core/factories.hpp>
#include <tracemod/io/serialize.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace tmod = tracemod;
  std::vector<std::byte> file(size);
  if (size > 0) std::memcpy(file.data(), data, size);
  if (size >= tmod::io::header_size) {
    std::uint64_t json_size = 0;
    std::memcpy(&json_size, file.data() + 32, 8);
    if (json_size <= size - tmod::io::header_size) {
      const std::uint32_t c = tmod::io::crc32c(std::span(file).subspan(tmod::io::header_size, json_size));
      std::memcpy(file.data() + 20, &c, 4);
    }
    const std::uint32_t h = tmod::io::crc32c(std::span(file).first(60));
    std::memcpy(file.data() + 60, &h, 4);
  }
  try {
    tmod::TracedModule m = tmod::load(std::span<const std::byte>(file), {.verify_tensor_checksums = false});
    for (const auto& [sig, g] : m.graphs()) {
      std::vector<tmod::graph::NodeValue> inputs;
      std::int64_t total = 0;
      const auto nodes = g->inputs();
      for (std::size_t i = 1; i < nodes.size(); ++i) {
        const auto* t = dynamic_cast<const tmod::graph::TensorNode*>(nodes[i]);
        if (t == nullptr) return 0;
        total += t->shape().numel();
        if (total > 100000) return 0;
        inputs.emplace_back(tmod::Value(tmod::zeros(t->shape(), t->dtype())));
      }
      (void)g->run(m, inputs);
    }
  } catch (const tmod::error&) {
  }
  return 0;
}
