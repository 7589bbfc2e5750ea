// Embedding: PyTorch's nn.Embedding, a lookup table of num_embeddings rows of embedding_dim floats
// indexed by an int32 tensor of any shape (F::embedding with a weight of its own).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/nn/init.hpp>
#include <tracemod/functional/embedding.hpp>
#include <tracemod/functional/param_value.hpp>
#include <tracemod/nn/module_config.hpp>
#include <tracemod/nn/reflection.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tracemod::nn {

/// Embedding(num_embeddings, embedding_dim, padding_idx = none): `weight` (num_embeddings,
/// embedding_dim) drawn from N(0, 1) as PyTorch does, with the padding_idx row zero. As in PyTorch,
/// padding_idx only shapes the initial weight (and, in training, the gradient): a forward call
/// returns whatever that row holds. A negative padding_idx counts from the end.
class Embedding : public Module {
 public:
  std::int64_t num_embeddings = 0;
  std::int64_t embedding_dim = 0;
  std::optional<std::int64_t> padding_idx;
  Parameter weight;  ///< (num_embeddings, embedding_dim)

  Embedding(std::int64_t num, std::int64_t dim, std::optional<std::int64_t> padding = std::nullopt)
      : num_embeddings(num), embedding_dim(dim), padding_idx(checked_padding(num, dim, padding)) {
    weight = Tensor::empty({num, dim}, DType::float32, "Embedding");
    for (float& v : weight.values<float>()) v = default_generator().normal();
    if (padding_idx)
      for (std::int64_t j = 0; j < dim; ++j) weight.data<float>()[*padding_idx * dim + j] = 0.f;
  }

  TM_BUILTIN_MODULE(Embedding, weight)

  [[nodiscard]] Value config() const {
    return Value::dict({{"num_embeddings", num_embeddings}, {"embedding_dim", embedding_dim},
                        {"padding_idx", functional::to_value(padding_idx)}});
  }
  /// The Embedding a config describes, its weight at placeholder size (load assigns the saved one
  /// and checks it against tensor_shapes()).
  static Embedding from_config(const Value& c) {
    const auto num = config_field<std::int64_t>(c, "Embedding", "num_embeddings");
    const auto dim = config_field<std::int64_t>(c, "Embedding", "embedding_dim");
    const auto padding = config_field<std::optional<std::int64_t>>(c, "Embedding", "padding_idx");
    Embedding m(0, 0);
    m.num_embeddings = num;
    m.embedding_dim = dim;
    m.padding_idx = checked_padding(num, dim, padding);
    return m;
  }
  [[nodiscard]] tensor_shape_list tensor_shapes() const { return {{"weight", Shape{num_embeddings, embedding_dim}}}; }

  [[nodiscard]] Tensor forward(const Tensor& x) const { return functional::embedding(x, weight); }
  [[nodiscard]] Shape infer_shape(const Shape& x) const {
    return functional::embedding_fn::infer_shape({}, x, weight.shape());
  }
  [[nodiscard]] Dims infer_dims(const ShapeDims& x) const {
    return functional::embedding_fn::infer_dims({}, x, {to_dims(weight.shape()), weight.shape()});
  }
  [[nodiscard]] functional::op_cost cost(const Shape& x) const {
    return functional::embedding_fn::cost({}, infer_shape(x), x, weight.shape());
  }
  /// F::embedding's rule (Gather), the weight written as an initializer named by `path`.
  void onnx_export(functional::onnx_export_context& cx, const std::string& path) const {
    using functional::onnx_operand;
    std::vector<onnx_operand> in{cx.input(0), onnx_operand::tensor(cx.graph().weight(weight, path + ".weight"), weight.shape())};
    functional::onnx_export_context gather = cx.with(cx.sub_call(std::move(in), cx.output()));
    functional::embedding_fn::onnx_export(gather, {});
  }

  [[nodiscard]] std::string extra_repr() const override {
    std::string s = std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
    if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
    return s;
  }

 private:
  /// padding_idx in [0, num) (a negative one counts from the end); value_error otherwise.
  static std::optional<std::int64_t> checked_padding(std::int64_t num, std::int64_t dim, std::optional<std::int64_t> p) {
    if (num < 0 || dim < 0)
      throw value_error("Embedding: num_embeddings (" + std::to_string(num) + ") and embedding_dim (" + std::to_string(dim) +
                        ") must be non-negative");
    if (!p) return p;
    if (*p < -num || *p >= num)
      throw value_error("Embedding: padding_idx " + std::to_string(*p) + " must be within num_embeddings " +
                        std::to_string(num));
    return *p < 0 ? *p + num : *p;
  }
};
TRACEMOD_BUILTIN_MODULE_CODE(Embedding)

}  // namespace tracemod::nn
