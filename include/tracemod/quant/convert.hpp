// quant::convert: the int8 graph of a calibrated prepared module (quant::prepare), as PyTorch FX's
// convert_fx and MegEngine's quantize. It works on the module's flattened graph
// (TracedModule::flatten) and leaves the prepared module unchanged:
//   - an activation FakeQuantize call becomes `quantize` (uint8) then `dequantize`: float users read
//     the dequantized value, quantized ops the uint8 one;
//   - conv2d / linear (+ a folded relu / relu6) whose input has qparams and whose output is observed
//     becomes quantized_conv2d / quantized_linear (quant/convert_weights.hpp quantizes its weights);
//   - an add (+ relu / relu6) of two tensors with qparams whose output is observed becomes
//     quantized_add;
//   - an input that shares qparams through pooling, flatten or reshape (graph_qparams.hpp's
//     shared_source) is quantized again with them where a quantized op reads it.
// Dequantizes nobody reads are erased. Activations are uint8: a signed scheme's zero point moves by
// 128 (the same levels). The quantized weights, per-channel weight scales and int32 biases are
// buffers of the top module named `<layer output>_qweight`, `_wscale`, `_qbias`.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/quantize.hpp>
#include <tracemod/functional/quantized_conv.hpp>
#include <tracemod/quant/convert_weights.hpp>
#include <tracemod/quant/graph_qparams.hpp>
#include <tracemod/quant/prepare.hpp>
#include <tracemod/traced_module/flatten.hpp>
#include <tracemod/traced_module/surgery.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tracemod::quant {

namespace detail {

class Converter {
 public:
  explicit Converter(TracedModule& m) : m_(m), g_(m.graph()) {}

  /// Converts every layer it can; returns how many conv2d / linear / add became quantized ops.
  std::size_t run() {
    check_calibrated();
    std::vector<graph::Expr*> exprs;
    for (const auto& e : g_.expr_list_()) exprs.push_back(e.get());
    for (graph::Expr* e : exprs) {
      if (done_.count(e) != 0) continue;
      if (fake_quantize_of(*e) != nullptr) {
        if (!is_weight_fake_quantize(*e)) quantize_at(*e);
      } else if (is_op(*e, {"conv2d", "linear"})) {
        convert_layer(*e);
      } else if (is_op(*e, {"__add__", "__radd__", "add"}) && e->inputs().size() == 2 && e->inputs()[0]->is_tensor() &&
                 e->inputs()[1]->is_tensor()) {
        convert_add(*e);
      }
    }
    g_.compile();
    return converted_;
  }

 private:
  /// value_error, before anything changes, for a graph without FakeQuantize calls or with an
  /// observer that saw no data.
  void check_calibrated() const {
    bool any = false;
    for (const auto& up : g_.expr_list_()) {
      const nn::FakeQuantize* fq = fake_quantize_of(*up);
      if (fq == nullptr) continue;
      any = true;
      if (!is_weight_fake_quantize(*up)) (void)activation_qparams(*up);
      else if (!fq->observer().observed())
        throw value_error("quant::convert: the " + fq->observer().name() + " of " + observed_name(*up) +
                          " saw no data; run the prepared module on calibration batches first");
    }
    if (!any)
      throw value_error("quant::convert: " + g_.name() + " has no FakeQuantize call; prepare it with quant::prepare " +
                        "and calibrate it first");
  }

  /// A FakeQuantize call on a weight (a getattr or constant): convert_layer reads it.
  static bool is_weight_fake_quantize(const graph::Expr& e) {
    return fake_quantize_of(e)->observer().scheme().per_channel || tensor_value(e.inputs()[1]) != nullptr;
  }

  /// The qparams node n has: its own (a dequantized value), or those it shares through pooling,
  /// flatten or reshape (q left null: it must be quantized again).
  [[nodiscard]] std::optional<quantized_value> qparams_at(const graph::Node* n) const {
    for (const graph::Node* at = n; at != nullptr;) {
      if (const auto it = shadow_.find(at); it != shadow_.end()) {
        quantized_value v = it->second;
        if (at != n) v.q = nullptr;
        return v;
      }
      at = at->expr() != nullptr ? shared_source(*at->expr()) : nullptr;
    }
    return std::nullopt;
  }

  /// The uint8 value of n inside an insert scope: its quantized twin or a new quantize.
  static Sym quantized(const graph::Node* n, const quantized_value& v) {
    if (v.q != nullptr) return Sym(v.q);
    return functional::quantize(Sym(const_cast<graph::Node*>(n)), functional::quantize_params{v.scale, v.zero_point, DType::uint8});
  }

  /// Records yq (uint8, qparams v) as the value of `old`: float users read its dequantize.
  void publish(const graph::Node* old, Sym yq, quantized_value v) {
    const Sym yd = functional::dequantize(yq, functional::dequantize_params{v.scale, v.zero_point});
    v.q = yq.node();
    shadow_[yd.node()] = v;
    replaced_.emplace_back(const_cast<graph::Node*>(old), yd.node());
  }

  void commit() {
    graph::replace_node(g_, replaced_);
    replaced_.clear();
  }

  void quantize_at(graph::Expr& fq_call) {
    quantized_value v = activation_qparams(fq_call);
    graph::Node* x = fq_call.inputs()[1];
    {
      auto scope = graph::insert_exprs(g_, &fq_call);
      publish(fq_call.output(), quantized(x, v), v);
    }
    commit();
  }

  /// The activation FakeQuantize call that observes e's output (after a folded relu / relu6), and
  /// the folded activation's mode; nullopt when the output is not observed.
  struct observed_output {
    graph::Expr* fq_call;
    std::string mode;
  };
  static std::optional<observed_output> observed(graph::Expr& e) {
    graph::Expr* act = folded_activation(e.output());
    const graph::Node* tail = act != nullptr ? act->output() : e.output();
    if (tail->users().size() != 1) return std::nullopt;
    graph::Expr* u = tail->users().front();
    const nn::FakeQuantize* fq = fake_quantize_of(*u);
    if (fq == nullptr || is_weight_fake_quantize(*u)) return std::nullopt;
    std::string mode = "identity";
    if (act != nullptr) {
      const Module* m = callee_of(*act);
      const std::string name = m != nullptr ? std::string(m->type_name()) : act->op()->name;
      mode = name == "ReLU6" || name == "relu6" ? "relu6" : "relu";
    }
    return observed_output{u, mode};
  }

  /// A buffer of the top module named after `stem`; returns its attribute name.
  std::string add_buffer(const std::string& stem, const Tensor& t) {
    std::string name = stem;
    for (int k = 1; m_.has_attr(name); ++k) name = stem + "_" + std::to_string(k);
    m_.setattr(name, t);
    return name;
  }

  void convert_layer(graph::Expr& e) {
    const bool conv = is_op(e, {"conv2d"});
    if (e.inputs().size() < 2) return;
    graph::Node* x = e.inputs()[0];
    const graph::Expr* wfq = e.inputs()[1]->expr();
    const nn::FakeQuantize* wq = wfq != nullptr ? fake_quantize_of(*wfq) : nullptr;
    const std::optional<quantized_value> in = qparams_at(x);
    const std::optional<observed_output> out = observed(e);
    if (wq == nullptr || !in || !out) return;
    const Tensor* w = tensor_value(wfq->inputs()[1]);
    const Tensor* b = e.inputs().size() > 2 ? tensor_value(e.inputs()[2]) : nullptr;
    if (w == nullptr || (e.inputs().size() > 2 && b == nullptr)) return;
    const std::string layer = "'" + e.output()->name() + "' (%" + std::to_string(e.output()->id()) + ")";
    const quantized_weights qw = quantize_weights(*wfq, *w, b, in->scale, layer);
    quantized_value v = activation_qparams(*out->fq_call);
    std::string stem = e.output()->name();
    std::replace(stem.begin(), stem.end(), '.', '_');
    const std::string wname = add_buffer(stem + "_qweight", qw.weight), sname = add_buffer(stem + "_wscale", qw.scale);
    const std::string bname = b != nullptr ? add_buffer(stem + "_qbias", qw.bias) : std::string();
    {
      auto scope = graph::insert_exprs(g_, out->fq_call);
      const Sym self(g_.inputs().front());
      const Sym xq = quantized(x, *in), wt = graph::attr(self, wname), sc = graph::attr(self, sname);
      const auto layer_call = [&]() -> Sym {
      if (conv) {
        const std::vector<Value> p = e.params();
        const auto pair = [&](std::size_t i, const char* name) {
          return functional::detail::param_from_value<functional::pair2>::get(p.at(i), "quant::convert", name);
        };
        const functional::quantized_conv2d_params qp{pair(0, "stride"), pair(1, "padding"), pair(2, "dilation"),
                                                     p.at(3).integer(), in->scale, in->zero_point, v.scale, v.zero_point,
                                                     out->mode};
        return b != nullptr ? functional::quantized_conv2d(xq, wt, sc, graph::attr(self, bname), qp)
                            : functional::quantized_conv2d(xq, wt, sc, none, qp);
      }
      const functional::quantized_io qp{in->scale, in->zero_point, v.scale, v.zero_point, out->mode};
      return b != nullptr ? functional::quantized_linear(xq, wt, sc, graph::attr(self, bname), qp)
                          : functional::quantized_linear(xq, wt, sc, none, qp);
      };
      publish(out->fq_call->output(), layer_call(), v);
    }
    commit();
    done_.insert(out->fq_call);
    ++converted_;
  }

  void convert_add(graph::Expr& e) {
    const std::optional<quantized_value> a = qparams_at(e.inputs()[0]), b = qparams_at(e.inputs()[1]);
    const std::optional<observed_output> out = observed(e);
    if (!a || !b || !out) return;
    quantized_value v = activation_qparams(*out->fq_call);
    {
      auto scope = graph::insert_exprs(g_, out->fq_call);
      const functional::quantized_add_params p{a->scale, a->zero_point, b->scale, b->zero_point,
                                               v.scale,  v.zero_point,  out->mode};
      publish(out->fq_call->output(),
              functional::quantized_add(quantized(e.inputs()[0], *a), quantized(e.inputs()[1], *b), p), v);
    }
    commit();
    done_.insert(out->fq_call);
    ++converted_;
  }

  TracedModule& m_;
  graph::Graph& g_;
  std::unordered_map<const graph::Node*, quantized_value> shadow_;
  std::vector<std::pair<graph::Node*, graph::Node*>> replaced_;
  std::unordered_set<const graph::Expr*> done_;
  std::size_t converted_ = 0;
};

}  // namespace detail

/// The int8 module of a calibrated prepared module (see the file comment); `prepared` is left
/// unchanged. Throws value_error when it has no FakeQuantize call (not prepared) or an observer saw
/// no data (not calibrated, naming the observed node), and for weights that are not signed and
/// symmetric.
[[nodiscard]] inline TracedModule convert(const TracedModule& prepared) {
  TracedModule m = prepared.flatten();
  detail::Converter(m).run();
  return m;
}

}  // namespace tracemod::quant
