// The pieces of quant::convert (quant/convert.hpp) that read a prepared graph's calibrated
// FakeQuantize calls: activation qparams as uint8 qparams, and a conv2d / linear's weights
// quantized per output channel (int8, zero point 0) with its bias at scale s_in * s_w[j] (int32).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/quantize.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/quant/fake_quantize.hpp>
#include <tracemod/quant/graph_qparams.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace tracemod::quant {

namespace detail {

/// A quantized value: its uint8 node and qparams.
struct quantized_value {
  graph::Node* q = nullptr;
  float scale = 1;
  std::int32_t zero_point = 0;
};

inline const nn::FakeQuantize* fake_quantize_of(const graph::Expr& e) {
  return e.is_module_call() && e.inputs().size() >= 2 ? dynamic_cast<const nn::FakeQuantize*>(e.callee()) : nullptr;
}

/// The live value of a tensor node that is a getattr or a constant; nullptr otherwise.
inline const Tensor* tensor_value(const graph::Node* n) {
  const graph::Expr* p = n == nullptr ? nullptr : n->expr();
  if (p == nullptr || !n->is_tensor()) return nullptr;
  if (p->kind() == graph::ExprKind::constant) return p->const_module() == nullptr ? &p->const_tensor() : nullptr;
  if (p->kind() != graph::ExprKind::get_attr || p->inputs().empty()) return nullptr;
  const auto* base = dynamic_cast<const graph::ModuleNode*>(p->inputs().front());
  const Module* m = base != nullptr ? base->owner() : nullptr;
  if (m == nullptr || !m->has_attr(p->name())) return nullptr;
  const ConstAttrRef ref = m->getattr(p->name());
  return ref.is_module() ? nullptr : &ref.tensor();
}

/// "'name' (%id, observed by path)": how errors name an observed node.
inline std::string observed_name(const graph::Expr& fq_call) {
  const graph::Node* in = fq_call.inputs()[1];
  return "'" + in->name() + "' (%" + std::to_string(in->id()) + ", observed by " + fq_call.inputs().front()->qualname() + ")";
}

/// The calibrated qparams of FakeQuantize call e, as uint8 qparams (a signed scheme's zero point + 128).
inline quantized_value activation_qparams(const graph::Expr& e) {
  const Observer& o = fake_quantize_of(e)->observer();
  const std::string node = observed_name(e);
  if (!o.observed())
    throw value_error("quant::convert: the " + o.name() + " of " + node +
                      " saw no data; run the prepared module on calibration batches first");
  const QParamsTensors t = o.calculate_qparams();
  const QParams q{o.scheme().dtype.name, t.scale.data<float>()[0], t.zero_point.data<std::int32_t>()[0]};
  check_qparams(q, o.scheme().dtype, node);
  return {nullptr, q.scale, q.zero_point + (o.scheme().dtype.is_signed ? 128 : 0)};
}

/// The int8 weight, its per-channel scales and the int32 bias of a conv2d / linear.
struct quantized_weights {
  Tensor weight, scale, bias;
};

/// Quantizes `w` with the weight FakeQuantize call `fq_call` (symmetric, signed: zero points 0)
/// and `bias` (may be null) at s_in * s_w[j]; value_error naming the layer otherwise.
inline quantized_weights quantize_weights(const graph::Expr& fq_call, const Tensor& w, const Tensor* bias, float s_in,
                                          const std::string& layer) {
  const Observer& o = fake_quantize_of(fq_call)->observer();
  if (!o.observed())
    throw value_error("quant::convert: the weight " + o.name() + " of " + layer +
                      " saw no data; run the prepared module on calibration batches first");
  const QScheme& s = o.scheme();
  if (!s.dtype.is_signed || (s.per_channel && s.axis != 0))
    throw value_error("quant::convert: the weights of " + layer + " are " + s.dtype.name +
                      (s.per_channel ? " per channel on axis " + std::to_string(s.axis) : std::string()) +
                      "; int8 layers take signed weights, per tensor or per output channel (axis 0)");
  const QParamsTensors t = o.calculate_qparams();
  const std::int64_t k = w.shape()[0], per = k == 0 ? 0 : w.numel() / k;
  quantized_weights r{Tensor::empty(w.shape(), DType::int8, "quant::convert"),
                      Tensor::empty(Shape{k}, DType::float32, "quant::convert"), Tensor()};
  const auto lo = static_cast<float>(s.dtype.quant_min), hi = static_cast<float>(s.dtype.quant_max);
  for (std::int64_t j = 0; j < k; ++j) {
    const std::size_t c = t.scale.numel() == 1 ? 0 : static_cast<std::size_t>(j);
    const float sw = t.scale.data<float>()[c];
    if (t.zero_point.data<std::int32_t>()[c] != 0)
      throw value_error("quant::convert: the weights of " + layer + " have zero point " +
                        std::to_string(t.zero_point.data<std::int32_t>()[c]) + " at channel " + std::to_string(j) +
                        "; int8 layers take symmetric weights (zero point 0)");
    check_qparams({s.dtype.name, sw, 0}, s.dtype, "the weights of " + layer);
    r.scale.data<float>()[j] = sw;
    const float inv = 1.0f / sw;
    for (std::int64_t i = 0; i < per; ++i)
      r.weight.data<std::int8_t>()[j * per + i] =
          static_cast<std::int8_t>(functional::detail::quantize_value(w.data<float>()[j * per + i], inv, 0.f, lo, hi));
  }
  if (bias != nullptr) {
    r.bias = Tensor::empty(Shape{k}, DType::int32, "quant::convert");
    for (std::int64_t j = 0; j < k; ++j) {
      const double v = std::nearbyint(static_cast<double>(bias->data<float>()[j]) /
                                      static_cast<double>(s_in * r.scale.data<float>()[j]));
      r.bias.data<std::int32_t>()[j] = static_cast<std::int32_t>(
          std::clamp(v, double(std::numeric_limits<std::int32_t>::min()), double(std::numeric_limits<std::int32_t>::max())));
    }
  }
  r.weight.make_read_only();
  return r;
}

}  // namespace detail
}  // namespace tracemod::quant
