// embedding: PyTorch's F.embedding(input, weight) without its training-only options. Each int32
// index of `input` (any shape) picks a row of `weight` (num_embeddings, embedding_dim); the output
// has shape input.shape + (embedding_dim,). An index outside [0, num_embeddings) is a value_error
// naming the op, the index, its position and the bound (PyTorch refuses negative indices too).
// padding_idx changes only the gradient and the initial weight in PyTorch, so it is M::Embedding's,
// not the op's. ONNX: Gather(weight, input, axis = 0).
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

namespace tracemod::functional {

/// The rows of `weight` that the int32 `inp` indexes: input.shape + (embedding_dim,).
struct embedding_fn : op_base<embedding_fn> {
  static constexpr std::string_view name = "embedding";
  static constexpr std::string_view target = "nn.embedding";
  static constexpr call_kind kind = call_kind::function;
  using params = no_params;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}, operand{"weight", operand_kind::tensor}};
  static constexpr std::tuple<> fields{};

  static constexpr Shape infer_shape(const params&, const Shape& idx, const Shape& weight) {
    if (weight.rank() != 2)
      throw shape_error(std::string(target) + ": weight " + weight.to_string() +
                        " must be (num_embeddings, embedding_dim) (input " + idx.to_string() + ")");
    if (idx.rank() + 1 > Shape::max_rank)
      throw shape_error(std::string(target) + ": input " + idx.to_string() + " leaves no room for the embedding axis");
    Shape out = idx;
    out.push_back(weight[1]);
    return out;
  }
  static Dims infer_dims(const params&, const ShapeDims& idx, const ShapeDims& weight) {
    Dims out = idx.dims;
    out.push_back(weight.dims[1]);
    return out;
  }
  static DType infer_dtype(const params*, std::span<const DType>) { return DType::float32; }
  /// No arithmetic: the indices and the rows they pick are read, the output written.
  static constexpr op_cost cost(const params&, const Shape& out, const Shape& idx, const Shape&) {
    return {0, 0, 4 * (idx.numel() + out.numel()), 4 * out.numel()};
  }

  static Tensor eager(const params& p, const Tensor& idx, const Tensor& weight) {
    require_defined(target, "inp", idx);
    if (idx.dtype() != DType::int32)
      throw dtype_error(std::string(target) + ": operand 'inp' has dtype " + std::string(dtype_name(idx.dtype())) +
                        " (shape " + idx.shape().to_string() + "), but the indices must be int32");
    require_float32(target, "weight", weight);
    const Shape out = infer_shape(p, idx.shape(), weight.shape());
    const std::int64_t rows = weight.shape()[0], dim = weight.shape()[1];
    const std::int32_t* in = idx.data<std::int32_t>();
    for (std::int64_t i = 0; i < idx.numel(); ++i)
      if (in[i] < 0 || in[i] >= rows)
        throw value_error(std::string(target) + ": index " + std::to_string(in[i]) + " at position " + std::to_string(i) +
                          " of input " + idx.shape().to_string() + " is out of range for weight " +
                          weight.shape().to_string() + " (indices must be in [0, " + std::to_string(rows) + "))");
    Tensor y = Tensor::empty(out, DType::float32, target);
    const float* w = weight.data<float>();
    float* dst = y.data<float>();
    const auto row_bytes = static_cast<std::size_t>(dim) * sizeof(float);
    for (std::int64_t i = 0; i < idx.numel(); ++i)
      if (row_bytes != 0) std::memcpy(dst + i * dim, w + static_cast<std::int64_t>(in[i]) * dim, row_bytes);
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params&) {
    cx.node("Gather", {cx.input(1).name, cx.input(0).name}, {cx.output()}, {{"axis", std::int64_t{0}}});
  }
};
inline constexpr embedding_fn embedding{};
TRACEMOD_REGISTER_BUILTIN_OP(embedding_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
