// libFuzzer target for tmod::onnx::import_model: any bytes must import or raise a tmod::error (a
// format_error for what is no valid ONNX model, a value_error for what tracemod cannot represent),
// never crash, leak or allocate beyond the input's size. Bytes protobuf cannot parse stop early:
// read_proto refuses them before import sees them. An imported module is also run on zero inputs of
// its input shapes (when small), which must compute or raise a tmod::error. Seeded with the models
// of ONNX's backend node tests (cmake/tracemod.sh copies them into build/fuzz/seeds/onnx).
#include <tracemod/core/factories.hpp>
#include <tracemod/onnx.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace tmod = tracemod;
  if (size > static_cast<std::size_t>(std::numeric_limits<int>::max())) return 0;
  tmod::onnx::proto::ModelProto model;
  if (!model.ParseFromArray(data, static_cast<int>(size))) return 0;
  try {
    tmod::TracedModule m = tmod::onnx::import_model(model);
    std::vector<tmod::graph::NodeValue> inputs;
    std::int64_t total = 0;
    const auto nodes = m.graph().inputs();
    for (std::size_t i = 1; i < nodes.size(); ++i) {  // nodes[0] is self
      const auto* t = static_cast<const tmod::graph::TensorNode*>(nodes[i]);
      total += t->shape().numel();
      if (total > 100000) return 0;
      inputs.emplace_back(tmod::Value(tmod::zeros(t->shape(), t->dtype())));
    }
    (void)m.run(inputs);
  } catch (const tmod::error&) {
  }
  return 0;
}
