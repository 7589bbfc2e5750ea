// The qparams of a prepared module's observed tensors (quant::prepare), after calibration:
// qparams_of reads them from each activation FakeQuantize call, annotate_qparams writes them to the
// graph's TensorNodes (printed at the end of the producing expr's line, `# quint8(scale=0.0235,
// zero_point=12)`), and the switches of MegEngine's megengine.quantization (enable_observer,
// disable_observer, enable_fake_quant, disable_fake_quant) act on every FakeQuantize of a module.
// Per-channel (weight) observers state one scale per channel, which a TensorNode's QParams does not
// hold: they are left out.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/qparams.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/quant/fake_quantize.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace tracemod::quant {

namespace detail {

/// The node whose qparams e's output shares: the input of a pooling, flatten or reshape (op or
/// module call), the output of a traced sub-module's graph; nullptr for any other expr.
inline const graph::Node* shared_source(const graph::Expr& e) {
  if (e.op() != nullptr) {
    const std::string& n = e.op()->name;
    const bool shares = n == "max_pool2d" || n == "avg_pool2d" || n == "adaptive_avg_pool2d" || n == "flatten" ||
                        n == "reshape";
    return shares && !e.inputs().empty() ? e.inputs().front() : nullptr;
  }
  if (!e.is_module_call() || e.inputs().size() < 2) return nullptr;
  const Module* m = e.callee();
  if (m == nullptr) return nullptr;
  if (const graph::Graph* sub = e.graph()) return sub->outputs().size() == 1 ? sub->outputs().front() : nullptr;
  const std::string_view t = m->type_name();
  return t == "MaxPool2d" || t == "AvgPool2d" || t == "AdaptiveAvgPool2d" || t == "Flatten" ? e.inputs()[1] : nullptr;
}

template <class F>
void for_each_fake_quantize(Module& m, F&& f) {
  for (Module& child : m.modules())
    if (auto* fq = dynamic_cast<nn::FakeQuantize*>(&child)) f(*fq);
}
}  // namespace detail

/// One observed tensor: the FakeQuantize call's input (the float tensor observed) and output.
struct ObservedTensor {
  graph::TensorNode* input = nullptr;
  graph::TensorNode* output = nullptr;
  QParams qparams;
};

/// Throws value_error naming `node` unless q's scale is positive and finite and its zero point is
/// in [quant_min, quant_max].
inline void check_qparams(const QParams& q, const QuantDType& d, const std::string& node) {
  if (!(q.scale > 0.f) || !std::isfinite(q.scale))
    throw value_error("quant: the scale " + repr_real(q.scale) + " of " + node + " is not positive and finite");
  if (q.zero_point < d.quant_min || q.zero_point > d.quant_max)
    throw value_error("quant: the zero point " + std::to_string(q.zero_point) + " of " + node + " is outside [" +
                      std::to_string(d.quant_min) + ", " + std::to_string(d.quant_max) + "] (" + d.name + ")");
}

/// The per-tensor qparams of every activation FakeQuantize call of `prepared`, in execution order.
/// Throws value_error when it has no FakeQuantize call (not prepared), and naming the node when an
/// observer saw no data (not calibrated).
[[nodiscard]] inline std::vector<ObservedTensor> qparams_of(const TracedModule& prepared) {
  std::vector<ObservedTensor> r;
  bool any = false;
  for (graph::Expr* e : prepared.graph().exprs(true).as_list()) {
    const auto* fq = e->is_module_call() ? dynamic_cast<const nn::FakeQuantize*>(e->callee()) : nullptr;
    if (fq == nullptr || e->inputs().size() < 2) continue;
    any = true;
    const Observer& o = fq->observer();
    if (o.scheme().per_channel) continue;
    auto* in = dynamic_cast<graph::TensorNode*>(e->inputs()[1]);
    auto* out = dynamic_cast<graph::TensorNode*>(e->output());
    const std::string node = "'" + in->name() + "' (%" + std::to_string(in->id()) + ", observed by " +
                             e->inputs().front()->qualname() + ")";
    if (!o.observed())
      throw value_error("quant::qparams_of: the " + o.name() + " of " + node +
                        " saw no data; run the prepared module on calibration batches first");
    const QParamsTensors t = o.calculate_qparams();
    const QParams q{o.scheme().dtype.name, t.scale.data<float>()[0], t.zero_point.data<std::int32_t>()[0]};
    check_qparams(q, o.scheme().dtype, node);
    r.push_back({in, out, q});
  }
  if (!any)
    throw value_error("quant::qparams_of: " + prepared.graph().name() +
                      " has no FakeQuantize call; prepare it with quant::prepare first");
  return r;
}

/// Sets the qparams of every observed tensor (the FakeQuantize call's input and output), of the
/// outputs of pooling, flatten and reshape calls that read an annotated tensor (they share its
/// qparams) and of traced sub-module calls whose graph's output is annotated; returns how many
/// nodes were set. Nothing is set when qparams_of throws.
inline std::size_t annotate_qparams(TracedModule& prepared) {
  const std::vector<ObservedTensor> observed = qparams_of(prepared);
  std::size_t n = 0;
  for (const ObservedTensor& o : observed) {
    o.input->set_qparams(o.qparams);
    o.output->set_qparams(o.qparams);
    n += 2;
  }
  // A traced sub-module's call output shares its graph's output's; each pass follows one more level.
  for (bool changed = true; changed;) {
    changed = false;
    for (graph::Expr* e : prepared.graph().exprs(true).as_list()) {
      auto* out = e->output_count() == 1 ? dynamic_cast<graph::TensorNode*>(e->output()) : nullptr;
      if (out == nullptr || out->qparams()) continue;
      const auto* in = dynamic_cast<const graph::TensorNode*>(detail::shared_source(*e));
      if (in == nullptr || !in->qparams()) continue;
      out->set_qparams(in->qparams());
      changed = true;
      ++n;
    }
  }
  return n;
}

/// MegEngine's megengine.quantization.enable_observer / disable_observer / enable_fake_quant /
/// disable_fake_quant: the flag of every FakeQuantize in m's tree.
inline void enable_observer(Module& m, bool on = true) {
  detail::for_each_fake_quantize(m, [&](nn::FakeQuantize& f) { f.enable_observer(on); });
}
inline void disable_observer(Module& m) { enable_observer(m, false); }
inline void enable_fake_quant(Module& m, bool on = true) {
  detail::for_each_fake_quantize(m, [&](nn::FakeQuantize& f) { f.enable_fake_quant(on); });
}
inline void disable_fake_quant(Module& m) { enable_fake_quant(m, false); }

}  // namespace tracemod::quant
