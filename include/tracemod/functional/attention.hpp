// scaled_dot_product_attention: PyTorch 2's F.scaled_dot_product_attention. q (..., L, E),
// k (..., S, E) and v (..., S, Ev) give softmax(q k^T * scale + attn_mask) v of shape (..., L, Ev);
// the leading batch dims of q, k and v broadcast together, scale defaults to 1 / sqrt(E), a float
// attn_mask broadcastable to (..., L, S) is added to the scores, and is_causal hides key j from
// query i when j > i. The kernel (kernels/attention.hpp) streams over blocks of keys with an online
// softmax and never holds the L x S scores. ONNX: exported as the chain MatMul(q, Transpose(k)),
// Mul by the scale, Add of the mask (or a causal mask initializer), Softmax on the last axis,
// MatMul with v; that chain imports as those ops.
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/attention.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace tracemod::functional {

struct scaled_dot_product_attention_params {
  bool is_causal = false;       ///< hide key j from query i when j > i
  std::optional<double> scale;  ///< none: 1 / sqrt(E)
};

namespace detail {

/// Per batch index of `batch` (row-major), the offset in floats of an operand of shape `s` whose
/// trailing two axes are a matrix: its leading axes broadcast (extent 1 or absent: offset 0).
inline std::vector<std::int64_t> attention_batch_offsets(const Shape& s, const Shape& batch) {
  const std::size_t r = batch.rank(), sr = s.rank() - 2;
  std::vector<std::int64_t> stride(r, 0);
  std::int64_t acc = s[s.rank() - 2] * s[s.rank() - 1];
  for (std::size_t i = sr; i-- > 0;) {
    stride[r - sr + i] = s[i] == 1 ? 0 : acc;
    acc *= s[i];
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(batch.numel()));
  std::vector<std::int64_t> idx(r, 0);
  for (std::int64_t& o : out) {
    o = 0;
    for (std::size_t d = 0; d < r; ++d) o += idx[d] * stride[d];
    for (std::size_t d = r; d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

}  // namespace detail

/// softmax(q k^T * scale + attn_mask) v, as PyTorch's F.scaled_dot_product_attention (without
/// dropout).
struct scaled_dot_product_attention_fn : op_base<scaled_dot_product_attention_fn> {
  static constexpr std::string_view name = "scaled_dot_product_attention";
  static constexpr std::string_view target = "nn.scaled_dot_product_attention";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"query", operand_kind::tensor}, operand{"key", operand_kind::tensor},
                                       operand{"value", operand_kind::tensor},
                                       operand{"attn_mask", operand_kind::optional_tensor}};
  using params = scaled_dot_product_attention_params;
  static constexpr std::tuple fields{positional("is_causal", &params::is_causal), positional("scale", &params::scale)};

  static std::string shapes(const Shape& q, const Shape& k, const Shape& v) {
    return std::string(target) + ": query " + q.to_string() + ", key " + k.to_string() + ", value " + v.to_string();
  }
  static constexpr Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

  /// The broadcast batch shape of q, k and v, after checking every operand.
  static constexpr Shape batch_shape(const params& p, const Shape& q, const Shape& k, const Shape& v, const Shape* mask) {
    if (q.rank() < 2 || k.rank() < 2 || v.rank() < 2)
      throw shape_error(shapes(q, k, v) + ": each must have rank >= 2");
    if (q.back() != k.back())
      throw shape_error(shapes(q, k, v) + ": the embedding sizes E of query and key differ");
    if (k[k.rank() - 2] != v[v.rank() - 2])
      throw shape_error(shapes(q, k, v) + ": the sequence lengths S of key and value differ");
    const Shape qb = batch_of(q), kb = batch_of(k), vb = batch_of(v);
    if (!broadcastable(qb, kb) || !broadcastable(broadcast_shapes(qb, kb, target), vb))
      throw shape_error(shapes(q, k, v) + ": the batch dims do not broadcast together");
    Shape batch = broadcast_shapes(broadcast_shapes(qb, kb, target), vb, target);
    if (mask) {
      if (p.is_causal)
        throw value_error(std::string(target) + ": attn_mask " + mask->to_string() +
                          " and is_causal cannot be given together");
      Shape scores = batch;
      scores.push_back(q[q.rank() - 2]);
      scores.push_back(k[k.rank() - 2]);
      if (mask->rank() > scores.rank() || !broadcastable(*mask, scores) || broadcast_shapes(*mask, scores, target) != scores)
        throw shape_error(shapes(q, k, v) + ": attn_mask " + mask->to_string() + " does not broadcast to the scores " +
                          scores.to_string());
    }
    return batch;
  }
  static constexpr Shape infer_shape(const params& p, const Shape& q, const Shape& k, const Shape& v, const Shape* mask) {
    Shape out = batch_shape(p, q, k, v, mask);
    out.push_back(q[q.rank() - 2]);
    out.push_back(v.back());
    return out;
  }
  /// The broadcast batch dims, then L from the query and Ev from the value.
  static Dims infer_dims(const params&, const ShapeDims& q, const ShapeDims& k, const ShapeDims& v, const ShapeDims*) {
    const auto batch = [](const ShapeDims& x) {
      const std::size_t n = x.dims.size() - 2;
      return ShapeDims{Dims(x.dims.begin(), x.dims.begin() + static_cast<std::ptrdiff_t>(n)),
                       Shape(x.shape.begin(), x.shape.begin() + n)};
    };
    const ShapeDims qb = batch(q), kb = batch(k), vb = batch(v);
    const ShapeDims qk{broadcast_dims(qb.dims, qb.shape, kb.dims, kb.shape, target), broadcast_shapes(qb.shape, kb.shape, target)};
    Dims out = broadcast_dims(qk.dims, qk.shape, vb.dims, vb.shape, target);
    out.push_back(q.dims[q.dims.size() - 2]);
    out.push_back(v.dims.back());
    return out;
  }
  /// The two products (L x S x E and L x S x Ev multiply-adds per batch), plus scaling, masking and
  /// the softmax's four operations per score.
  static constexpr op_cost cost(const params& p, const Shape& out, const Shape& q, const Shape& k, const Shape& v,
                                const Shape* mask) {
    const std::int64_t batches = batch_shape(p, q, k, v, mask).numel();
    const std::int64_t scores = batches * q[q.rank() - 2] * k[k.rank() - 2];
    (void)out;
    return mac_cost(scores * (q.back() + v.back()), scores * (mask ? 6 : 5));
  }

  template <class M>
  static Tensor eager(const params& p, const Tensor& q, const Tensor& k, const Tensor& v, const M& mask) {
    require_float32(target, "query", q);
    require_float32(target, "key", k);
    require_float32(target, "value", v);
    std::optional<Shape> mask_shape;
    const float* mask_data = nullptr;
    if constexpr (!std::same_as<M, none_t>) {
      require_float32(target, "attn_mask", mask);
      mask_shape = mask.shape();
      mask_data = mask.template data<float>();
    }
    const Shape batch = batch_shape(p, q.shape(), k.shape(), v.shape(), mask_shape ? &*mask_shape : nullptr);
    kernels::attention_geometry g;
    g.batches = batch.numel();
    g.L = q.size(-2);
    g.S = k.size(-2);
    g.E = q.size(-1);
    g.Ev = v.size(-1);
    g.scale = static_cast<float>(p.scale.value_or(1.0 / std::sqrt(static_cast<double>(g.E))));
    g.causal = p.is_causal;
    const std::vector<std::int64_t> qo = detail::attention_batch_offsets(q.shape(), batch),
                                    ko = detail::attention_batch_offsets(k.shape(), batch),
                                    vo = detail::attention_batch_offsets(v.shape(), batch);
    std::vector<std::int64_t> mo;
    g.q_offset = qo.data();
    g.k_offset = ko.data();
    g.v_offset = vo.data();
    if (mask_shape) {
      // The mask as a (..., L, S) operand: a missing or unit L or S axis has stride 0.
      Shape m{1, 1};
      if (mask_shape->rank() >= 2) m = *mask_shape;
      if (mask_shape->rank() == 1) m = Shape{1, (*mask_shape)[0]};
      const std::int64_t ml = m[m.rank() - 2], ms = m[m.rank() - 1];
      g.mask_col_stride = ms == 1 ? 0 : 1;
      g.mask_row_stride = ml == 1 ? 0 : ms;
      mo = detail::attention_batch_offsets(m, batch);
      g.mask_offset = mo.data();
    }
    Shape out = batch;
    out.push_back(g.L);
    out.push_back(g.Ev);
    Tensor y = Tensor::empty(out, DType::float32, target);
    kernels::scaled_dot_product_attention(g, q.data<float>(), k.data<float>(), v.data<float>(), mask_data, y.data<float>());
    return y;
  }

  /// PyTorch's order: F::scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale).
  template <class Q, class K, class V, class M = none_t>
  decltype(auto) operator()(const Q& q, const K& k, const V& v, const M& attn_mask = none, bool is_causal = false,
                            std::optional<double> scale = std::nullopt) const {
    return apply(params{is_causal, scale}, q, k, v, attn_mask);
  }

  /// MatMul(q, Transpose(k)), Mul by the scale, Add of the mask (or of a causal initializer holding
  /// -inf above the diagonal), Softmax on the last axis, MatMul with v.
  static void onnx_export(onnx_export_context& cx, const params& p) {
    const Shape& q = cx.input(0).shape;
    const Shape& k = cx.input(1).shape;
    const std::string out = cx.output();
    std::vector<std::int64_t> perm;
    for (std::size_t i = 0; i < k.rank(); ++i) perm.push_back(static_cast<std::int64_t>(i));
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    const std::string kt = cx.node1("Transpose", {cx.input(1).name}, cx.fresh(out + "_key_t"), {{"perm", perm}});
    const std::string qk = cx.node1("MatMul", {cx.input(0).name, kt}, cx.fresh(out + "_qk"));
    const double scale = p.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.back())));
    std::string scores = cx.node1("Mul", {qk, cx.graph().scalar(scale)}, cx.fresh(out + "_scores"));
    if (cx.input(3).is_tensor()) {
      scores = cx.node1("Add", {scores, cx.input(3).name}, cx.fresh(out + "_masked"));
    } else if (p.is_causal) {
      const std::int64_t l = q[q.rank() - 2], s = k[k.rank() - 2];
      Tensor causal = Tensor::empty(Shape{l, s}, DType::float32, target);
      float* c = causal.data<float>();
      for (std::int64_t i = 0; i < l; ++i)
        for (std::int64_t j = 0; j < s; ++j) c[i * s + j] = j > i ? -std::numeric_limits<float>::infinity() : 0.f;
      scores = cx.node1("Add", {scores, cx.graph().initializer(causal, "causal_mask")}, cx.fresh(out + "_masked"));
    }
    const auto rank = static_cast<std::int64_t>(cx.output_shape().rank());
    const std::string weights = cx.node1("Softmax", {scores}, cx.fresh(out + "_weights"), {{"axis", rank - 1}});
    cx.node("MatMul", {weights, cx.input(2).name}, {out});
  }
};
inline constexpr scaled_dot_product_attention_fn scaled_dot_product_attention{};
TRACEMOD_REGISTER_BUILTIN_OP(scaled_dot_product_attention_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
