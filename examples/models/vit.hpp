// Vision Transformer with torchvision's topology and parameter names, so a torchvision state_dict
// loads 1:1 (class_token, conv_proj, encoder.pos_embedding,
// encoder.layers.encoder_layer_<i>.{ln_1, self_attention, ln_2, mlp.0, mlp.3}, encoder.ln,
// heads.head). The options are torchvision.models.VisionTransformer's arguments; the defaults are
// vit_b_16's (224x224 images, 16x16 patches, 12 layers of 12 heads, hidden 768, MLP 3072).
//
// Dropout is the identity at inference; the Dropout children keep torchvision's module tree and
// indices (mlp.1 is the GELU, mlp.2 and mlp.4 dropouts), so the keys line up.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/factories.hpp>
#include <tracemod/functional/indexing.hpp>
#include <tracemod/functional/shape_ops.hpp>
#include <tracemod/functional/shape_values.hpp>
#include <tracemod/functional/stack.hpp>
#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/dropout.hpp>
#include <tracemod/nn/init.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/module_dict.hpp>
#include <tracemod/nn/norm_layers.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/nn/sequential.hpp>
#include <tracemod/nn/transformer.hpp>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace models {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;

/// torchvision's MLPBlock: Linear(hidden, mlp), GELU, Dropout, Linear(mlp, hidden), Dropout.
using ViTMLP = M::Sequential<M::Linear, M::GELU, M::Dropout, M::Linear, M::Dropout>;

/// torchvision's EncoderBlock (pre-norm): x + attention(ln_1(x)), then that + mlp(ln_2(that)).
/// Inputs are batch-first (N, L, hidden).
struct ViTEncoderBlock : tmod::Module {
  M::LayerNorm ln_1;
  M::MultiheadAttention self_attention;
  M::Dropout dropout;
  M::LayerNorm ln_2;
  ViTMLP mlp;

  ViTEncoderBlock(std::int64_t num_heads, std::int64_t hidden_dim, std::int64_t mlp_dim, double dropout_p = 0.0)
      : ln_1({hidden_dim}, 1e-6),
        self_attention(hidden_dim, num_heads, {.batch_first = true}),
        dropout(dropout_p),
        ln_2({hidden_dim}, 1e-6),
        mlp(M::Linear(hidden_dim, mlp_dim), M::GELU(), M::Dropout(dropout_p), M::Linear(mlp_dim, hidden_dim),
            M::Dropout(dropout_p)) {}

  TM_MODULE(ViTEncoderBlock, ln_1, self_attention, dropout, ln_2, mlp)

  auto forward(const auto& input) const {
    auto normed = ln_1(input);
    auto attended = self_attention(normed, normed, normed);
    auto x = dropout(attended) + input;
    auto y = mlp(ln_2(x));
    return x + y;
  }
};

/// torchvision's Encoder: adds pos_embedding (1, seq_length, hidden), runs the layers
/// encoder_layer_0, encoder_layer_1, ... in turn, then the final LayerNorm `ln`.
struct ViTEncoder : tmod::Module {
  tmod::Parameter pos_embedding;
  M::Dropout dropout;
  M::ModuleDict<ViTEncoderBlock> layers;
  M::LayerNorm ln;

  ViTEncoder(std::int64_t seq_length, std::int64_t num_layers, std::int64_t num_heads, std::int64_t hidden_dim,
             std::int64_t mlp_dim, double dropout_p = 0.0)
      : pos_embedding(tmod::randn({1, seq_length, hidden_dim})), dropout(dropout_p), ln({hidden_dim}, 1e-6) {
    pos_embedding *= 0.02F;  // torchvision: normal with std 0.02
    for (std::int64_t i = 0; i < num_layers; ++i)
      layers.insert("encoder_layer_" + std::to_string(i), ViTEncoderBlock(num_heads, hidden_dim, mlp_dim, dropout_p));
  }

  TM_MODULE(ViTEncoder, pos_embedding, dropout, layers, ln)

  template <class X>
  auto forward(const X& input) const {
    using Out = std::remove_cvref_t<decltype(std::declval<const ViTEncoderBlock&>()(input))>;
    Out x = dropout(input + pos_embedding);
    for (const auto& [name, layer] : layers) x = layer(x);
    return ln(x);
  }
};

/// torchvision's `heads` (without a representation layer): one Linear named `head`.
struct ViTHeads : tmod::Module {
  M::Linear head;

  ViTHeads(std::int64_t hidden_dim, std::int64_t num_classes) : head(hidden_dim, num_classes) {}

  TM_MODULE(ViTHeads, head)

  auto forward(const auto& x) const { return head(x); }
};

/// torchvision.models.VisionTransformer's arguments (representation_size None, no conv stem).
struct VisionTransformerOptions {
  std::int64_t image_size = 224;
  std::int64_t patch_size = 16;
  std::int64_t num_layers = 12;
  std::int64_t num_heads = 12;
  std::int64_t hidden_dim = 768;
  std::int64_t mlp_dim = 3072;
  double dropout = 0.0;
  std::int64_t num_classes = 1000;
};

/// torchvision.models.VisionTransformer: patches by a conv of kernel and stride patch_size
/// (conv_proj), flattened to a sequence (N, patches, hidden), the class token prepended, the
/// encoder, and heads on the class token's output. Inputs are (N, 3, image_size, image_size).
struct VisionTransformer : tmod::Module {
  VisionTransformerOptions options;
  tmod::Parameter class_token;  ///< (1, 1, hidden_dim)
  M::Conv2d conv_proj;
  ViTEncoder encoder;
  ViTHeads heads;

  explicit VisionTransformer(VisionTransformerOptions o = {})
      : options(checked(o)),
        class_token(tmod::zeros({1, 1, o.hidden_dim})),
        conv_proj(3, o.hidden_dim, o.patch_size, {.stride = o.patch_size}),
        encoder(seq_length(o), o.num_layers, o.num_heads, o.hidden_dim, o.mlp_dim, o.dropout),
        heads(o.hidden_dim, o.num_classes) {}

  TM_MODULE(VisionTransformer, class_token, conv_proj, encoder, heads)

  template <class X>
  auto forward(const X& x) const {
    check_input(x.shape());
    auto patches = conv_proj(x);                               // (N, hidden, H / p, W / p)
    auto flat = F::flatten(patches, {.start_axis = 2});         // (N, hidden, patches)
    auto sequence = F::transpose(flat, F::int_list{0, 2, 1});  // (N, patches, hidden)
    auto tokens = F::concat(std::tuple{batch_class_token(sequence), sequence}, 1);
    auto encoded = encoder(tokens);
    auto first = F::getitem(encoded, tmod::all, 0);  // the class token's output, (N, hidden)
    return heads(first);
  }

 private:
  static std::int64_t seq_length(const VisionTransformerOptions& o) {
    const std::int64_t side = o.image_size / o.patch_size;
    return side * side + 1;
  }
  static VisionTransformerOptions checked(const VisionTransformerOptions& o) {
    if (o.patch_size <= 0 || o.image_size <= 0 || o.image_size % o.patch_size != 0)
      throw tmod::value_error("VisionTransformer: image_size " + std::to_string(o.image_size) +
                              " must be a positive multiple of patch_size " + std::to_string(o.patch_size));
    if (o.hidden_dim <= 0 || o.num_heads <= 0 || o.hidden_dim % o.num_heads != 0)
      throw tmod::value_error("VisionTransformer: hidden_dim " + std::to_string(o.hidden_dim) +
                              " must be a positive multiple of num_heads " + std::to_string(o.num_heads));
    if (o.num_layers < 0 || o.mlp_dim <= 0 || o.num_classes <= 0)
      throw tmod::value_error("VisionTransformer: num_layers " + std::to_string(o.num_layers) + ", mlp_dim " +
                              std::to_string(o.mlp_dim) + ", num_classes " + std::to_string(o.num_classes) +
                              ": layers must be non-negative, the others positive");
    return o;
  }
  void check_input(const tmod::Shape& s) const {
    if (s.rank() != 4 || s[1] != 3 || s[2] != options.image_size || s[3] != options.image_size)
      throw tmod::shape_error("VisionTransformer: input " + s.to_string() + " must be (N, 3, " +
                              std::to_string(options.image_size) + ", " + std::to_string(options.image_size) +
                              "), the image size its pos_embedding was made for");
  }
  /// class_token broadcast to (N, 1, hidden) for the N images of `sequence` (torchvision's
  /// class_token.expand(n, -1, -1)): N read as a value, so a trace keeps it dynamic when the
  /// trace makes it so.
  template <class S>
  auto batch_class_token(const S& sequence) const {
    return F::expand_to(class_token, F::tensor_from_list(F::size(sequence, 0), -1, -1));
  }
};

/// torchvision.models.vit_b_16's architecture: 224x224 images, 16x16 patches, 12 layers, 12 heads,
/// hidden 768, MLP 3072.
inline VisionTransformer vit_b_16(std::int64_t num_classes = 1000) {
  return VisionTransformer({.num_classes = num_classes});
}

}  // namespace models
