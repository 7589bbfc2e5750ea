// MultiheadAttention, TransformerEncoderLayer and TransformerEncoder: PyTorch's nn modules of those
// names, with their state_dict keys. They are composite modules (TM_MODULE, not builtin): their
// forward is written with functional ops and builtin children (Linear, LayerNorm, Dropout), so a
// trace records those ops in a graph of their own, as torch.fx records a module it traces through,
// and the interpreter, save/load, the passes and the ONNX exporter see only ops they know.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/factories.hpp>
#include <tracemod/core/none.hpp>
#include <tracemod/functional/activations.hpp>
#include <tracemod/functional/attention.hpp>
#include <tracemod/functional/compare.hpp>
#include <tracemod/functional/indexing.hpp>
#include <tracemod/functional/linalg.hpp>
#include <tracemod/functional/shape_ops.hpp>
#include <tracemod/nn/dropout.hpp>
#include <tracemod/nn/init.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/module_list.hpp>
#include <tracemod/nn/norm_layers.hpp>
#include <tracemod/nn/reflection.hpp>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tracemod::nn {

/// PyTorch's keyword arguments of nn.MultiheadAttention that tracemod takes.
struct MultiheadAttentionOptions {
  double dropout = 0.0;      ///< attention dropout: only 0 is supported in training mode
  bool bias = true;          ///< in_proj_bias and out_proj.bias
  bool batch_first = false;  ///< inputs (N, L, E) instead of (L, N, E)
};

/// MultiheadAttention(embed_dim, num_heads, {.bias, .batch_first}): PyTorch's nn.MultiheadAttention
/// with kdim = vdim = embed_dim, without add_bias_kv and add_zero_attn. forward(query, key, value,
/// key_padding_mask) returns the attention output only (PyTorch's need_weights=False); the optional
/// key_padding_mask is a bool (N, S) tensor whose true entries are keys to ignore.
class MultiheadAttention : public Module {
 public:
  std::int64_t embed_dim = 0;
  std::int64_t num_heads = 1;
  MultiheadAttentionOptions options;
  Parameter in_proj_weight;  ///< (3 * embed_dim, embed_dim): the q, k and v projections stacked
  Parameter in_proj_bias;    ///< (3 * embed_dim,); undefined without bias
  Linear out_proj;

  MultiheadAttention(std::int64_t embed, std::int64_t heads, MultiheadAttentionOptions o = {})
      : embed_dim(checked_embed(embed, heads)), num_heads(heads), options(o), out_proj(embed, embed, o.bias) {
    if (!(o.dropout >= 0 && o.dropout <= 1))
      throw value_error("MultiheadAttention: dropout " + std::to_string(o.dropout) + " must be in [0, 1]");
    in_proj_weight = Tensor::empty({3 * embed, embed}, DType::float32, "MultiheadAttention");
    const double bound = std::sqrt(6.0 / static_cast<double>(embed + 3 * embed));  // xavier_uniform_, as PyTorch
    init::uniform_(in_proj_weight, -bound, bound);
    if (o.bias) {
      in_proj_bias = zeros({3 * embed});
      init::zeros_(out_proj.bias);
    }
  }

  TM_MODULE(MultiheadAttention, in_proj_weight, in_proj_bias, out_proj)

  template <class Q, class K, class V, class Mask = none_t>
  auto forward(const Q& query, const K& key, const V& value, const Mask& key_padding_mask = none) const {
    check_inputs(query.shape(), key.shape(), value.shape());
    if (training() && options.dropout > 0)
      throw module_error("MultiheadAttention: attention dropout " + std::to_string(options.dropout) +
                         " is not supported in training mode (call eval())");
    const auto [q, k, v] = projections(query, key, value);
    if constexpr (std::same_as<Mask, none_t>) {
      return merge(functional::scaled_dot_product_attention(q, k, v), query.shape());
    } else {
      check_mask(key_padding_mask.shape(), key_padding_mask.dtype(), key.shape());
      const std::int64_t n = key_padding_mask.shape()[0], s = key_padding_mask.shape()[1];
      const auto additive = functional::where(key_padding_mask, full({1}, -std::numeric_limits<float>::infinity()), zeros({1}));
      const auto mask = functional::reshape(additive, mask_shape(n, s));
      return merge(functional::scaled_dot_product_attention(q, k, v, mask), query.shape());
    }
  }

 private:
  static std::int64_t checked_embed(std::int64_t embed, std::int64_t heads) {
    if (embed <= 0 || heads <= 0 || embed % heads != 0)
      throw value_error("MultiheadAttention: embed_dim " + std::to_string(embed) + " must be positive and divisible by num_heads " +
                        std::to_string(heads));
    return embed;
  }
  [[nodiscard]] std::string layout() const { return options.batch_first ? "(N, L, E)" : "(L, N, E)"; }
  [[nodiscard]] std::int64_t batch(const Shape& s) const { return s[options.batch_first ? 0 : 1]; }
  [[nodiscard]] std::int64_t length(const Shape& s) const { return s[options.batch_first ? 1 : 0]; }

  void check_inputs(const Shape& q, const Shape& k, const Shape& v) const {
    const auto fail = [&](const std::string& why) {
      return shape_error("MultiheadAttention(embed_dim=" + std::to_string(embed_dim) + ", num_heads=" +
                         std::to_string(num_heads) + "): query " + q.to_string() + ", key " + k.to_string() + ", value " +
                         v.to_string() + ": " + why);
    };
    for (const Shape* s : {&q, &k, &v})
      if (s->rank() != 3 || (*s)[2] != embed_dim)
        throw fail("each must be " + layout() + " with E = embed_dim " + std::to_string(embed_dim));
    if (batch(q) != batch(k) || batch(k) != batch(v)) throw fail("the batch sizes differ");
    if (length(k) != length(v)) throw fail("key and value must have one sequence length");
  }
  void check_mask(const Shape& m, DType dtype, const Shape& k) const {
    if (dtype != DType::boolean || m.rank() != 2 || m[0] != batch(k) || m[1] != length(k))
      throw shape_error("MultiheadAttention: key_padding_mask (" + std::string(dtype_name(dtype)) + ", shape " +
                        m.to_string() + ") must be bool (N, S) = (" + std::to_string(batch(k)) + ", " +
                        std::to_string(length(k)) + ") for key " + k.to_string());
  }

  /// x @ in_proj_weight^T + in_proj_bias: the three projections of x. Cross-attention keeps one
  /// slice of each (slicing the parameter instead would run eagerly while tracing and freeze its
  /// values into the graph as a constant, out of reach of load_state_dict).
  template <class X>
  auto project_all(const X& x) const {
    return in_proj_bias.defined() ? functional::linear(x, in_proj_weight, in_proj_bias) : functional::linear(x, in_proj_weight);
  }
  /// The E features of the last axis from `first` on.
  template <class X>
  auto slice_of(const X& x, std::int64_t first) const {
    return functional::getitem(x, ellipsis, slice(first, first + embed_dim));
  }
  /// Whether a and b are one value: one tensor object, or while tracing one graph node (a
  /// tmod::Sym passed three times arrives as three copies of one node).
  template <class T>
  static bool same_value(const T& a, const T& b) {
    if constexpr (requires { a.node() == b.node(); })
      return a.node() == b.node();
    else
      return &a == &b;
  }
  /// The q, k and v heads. Self-attention (one value passed three times, as PyTorch's fast path
  /// checks with `is`) projects once and slices the three parts from that one result.
  template <class Q, class K, class V>
  auto projections(const Q& query, const K& key, const V& value) const {
    const std::int64_t e = embed_dim;
    if constexpr (std::same_as<Q, K> && std::same_as<K, V>) {
      if (same_value(query, key) && same_value(key, value)) {
        const auto all = project_all(query);
        return std::tuple{heads(slice_of(all, 0), query.shape()), heads(slice_of(all, e), key.shape()),
                          heads(slice_of(all, 2 * e), value.shape())};
      }
    }
    return std::tuple{heads(slice_of(project_all(query), 0), query.shape()),
                      heads(slice_of(project_all(key), e), key.shape()),
                      heads(slice_of(project_all(value), 2 * e), value.shape())};
  }
  /// (L, N, E) or (N, L, E) to (N, H, L, E / H). The reshape infers the leading axis, so a trace
  /// with that axis dynamic stays dynamic.
  template <class X>
  auto heads(const X& x, const Shape& s) const {
    const std::int64_t h = num_heads, d = embed_dim / num_heads;
    const std::int64_t lead = s[0] == 0 ? 0 : -1;
    const auto split = functional::reshape(x, {lead, s[1], h, d});
    return functional::transpose(split, options.batch_first ? functional::int_list{0, 2, 1, 3} : functional::int_list{1, 2, 0, 3});
  }
  /// (N, 1, 1, S) for the additive mask, inferring the axis that leads the layout (S for (L, N, E),
  /// N for batch-first inputs), so that axis may be dynamic as in heads().
  [[nodiscard]] functional::int_list mask_shape(std::int64_t n, std::int64_t s) const {
    if (n == 0 || s == 0) return {n, 1, 1, s};
    return options.batch_first ? functional::int_list{-1, 1, 1, s} : functional::int_list{n, 1, 1, -1};
  }
  /// (N, H, L, E / H) back to the query's layout, then out_proj.
  template <class X>
  auto merge(const X& x, const Shape& q) const {
    const auto ordered = functional::transpose(x, options.batch_first ? functional::int_list{0, 2, 1, 3}
                                                                       : functional::int_list{2, 0, 1, 3});
    const auto joined = functional::reshape(ordered, {q[0] == 0 ? 0 : -1, q[1], embed_dim});
    return out_proj(joined);
  }
};

/// PyTorch's keyword arguments of nn.TransformerEncoderLayer.
struct TransformerEncoderLayerOptions {
  std::int64_t dim_feedforward = 2048;
  double dropout = 0.1;            ///< the three Dropout children's p (identity in eval mode)
  std::string activation = "relu";  ///< "relu" or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
};

/// TransformerEncoderLayer(d_model, nhead, {.dim_feedforward, .dropout, .activation,
/// .layer_norm_eps, .batch_first, .norm_first}): PyTorch's nn.TransformerEncoderLayer (self
/// attention, then a feed-forward block, each with a residual and a LayerNorm, after it or, with
/// norm_first, before it). forward(src, src_key_padding_mask) takes the bool (N, S) padding mask as
/// its second argument; PyTorch's src_mask is not supported.
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayerOptions options;
  MultiheadAttention self_attn;
  Linear linear1;
  Dropout dropout;
  Linear linear2;
  LayerNorm norm1;
  LayerNorm norm2;
  Dropout dropout1;
  Dropout dropout2;

  TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead, TransformerEncoderLayerOptions o = {})
      : options(checked(std::move(o))),
        self_attn(d_model, nhead, {.dropout = options.dropout, .bias = true, .batch_first = options.batch_first}),
        linear1(d_model, options.dim_feedforward),
        dropout(options.dropout),
        linear2(options.dim_feedforward, d_model),
        norm1({d_model}, options.layer_norm_eps),
        norm2({d_model}, options.layer_norm_eps),
        dropout1(options.dropout),
        dropout2(options.dropout) {}

  TM_MODULE(TransformerEncoderLayer, self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2)

  template <class X, class Mask = none_t>
  auto forward(const X& src, const Mask& src_key_padding_mask = none) const {
    if (options.norm_first) {
      const auto normed = norm1(src);
      const auto x = src + dropout1(self_attn(normed, normed, normed, src_key_padding_mask));
      return x + dropout2(feed_forward(norm2(x)));
    }
    const auto x = norm1(src + dropout1(self_attn(src, src, src, src_key_padding_mask)));
    return norm2(x + dropout2(feed_forward(x)));
  }

 private:
  static TransformerEncoderLayerOptions checked(TransformerEncoderLayerOptions o) {
    if (o.activation != "relu" && o.activation != "gelu")
      throw value_error("TransformerEncoderLayer: activation '" + o.activation + "' must be 'relu' or 'gelu'");
    if (o.dim_feedforward <= 0)
      throw value_error("TransformerEncoderLayer: dim_feedforward " + std::to_string(o.dim_feedforward) + " must be positive");
    return o;
  }
  template <class X>
  auto feed_forward(const X& x) const {
    const auto hidden = linear1(x);
    const auto active = options.activation == "gelu" ? functional::gelu(hidden) : functional::relu(hidden);
    return linear2(dropout(active));
  }
};

/// TransformerEncoder(encoder_layer, num_layers): num_layers independent copies of encoder_layer
/// (each with weights of its own, as PyTorch's deep copies), run in turn; state_dict keys
/// `layers.0.self_attn.in_proj_weight`, .... forward(src, src_key_padding_mask) as the layer's.
/// PyTorch's nested-tensor fast path (which zeroes padded positions) is not taken: padded positions
/// hold what the layers compute, as PyTorch's enable_nested_tensor=False gives.
class TransformerEncoder : public Module {
 public:
  ModuleList<TransformerEncoderLayer> layers;
  std::int64_t num_layers = 0;

  TransformerEncoder(const TransformerEncoderLayer& layer, std::int64_t n) : num_layers(n) {
    if (n < 0) throw value_error("TransformerEncoder: num_layers " + std::to_string(n) + " must be non-negative");
    for (std::int64_t i = 0; i < n; ++i) layers.append(layer.clone());
  }

  TM_MODULE(TransformerEncoder, layers)

  template <class X, class Mask = none_t>
  auto forward(const X& src, const Mask& src_key_padding_mask = none) const {
    using Out = std::remove_cvref_t<decltype(std::declval<const TransformerEncoderLayer&>()(src, src_key_padding_mask))>;
    Out x = src;
    for (const TransformerEncoderLayer& layer : layers) x = layer(x, src_key_padding_mask);
    return x;
  }
};

}  // namespace tracemod::nn
