// quant::prepare: a traced module with observers in its graph, as PyTorch FX's prepare_fx and
// MegEngine's quantize_qat on a TracedModule. Batch norms are folded into their convs first
// (FuseConvBn); then, in every graph of the hierarchy,
//   - each input of the top graph is observed (`x_fake_quant_out = x_fake_quant(x, )`);
//   - each conv2d / linear (module or function call) gets a weight FakeQuantize (qconfig.weight())
//     on its weight: a Conv2d / Linear module call becomes `nn.conv2d` / `nn.linear` of the
//     fake-quantized `getattr(conv, "weight")`; its output is observed (qconfig.activation()), after
//     a following relu / relu6 when that is the output's only user;
//   - each add of two tensors is observed, after a following relu / relu6 alike;
//   - pooling, flatten, reshape and concat get no observer: they share their input's qparams.
// The FakeQuantize modules are attributes of the graph's module named `<node>_fake_quant`.
// PrepareOptions choose a qconfig per qualified module name and per module type (nullopt: leave
// float); Module::disable_quantize() leaves a module and its descendants float.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/conv.hpp>
#include <tracemod/functional/linalg.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/passes/optimize.hpp>
#include <tracemod/quant/fake_quantize.hpp>
#include <tracemod/quant/qconfig.hpp>
#include <tracemod/traced_module/surgery.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tracemod::quant {

struct PrepareOptions {
  /// By qualified module name ("layer1.0.conv1", or "layer1" for everything inside it); the longest
  /// matching name wins over module_type and the global qconfig. nullopt leaves it float.
  std::map<std::string, std::optional<QConfig>, std::less<>> module_name = {};
  /// By module type name ("Conv2d", "Linear", or a traced module's type for the ops of its graph).
  std::map<std::string, std::optional<QConfig>, std::less<>> module_type = {};
  /// Fold batch norms into convs first (FuseConvBn).
  bool fuse_conv_bn = true;
};

namespace detail {

/// Throws value_error naming `who` unless each observer of `q` can be made and its dtype range
/// fits 8 bits.
inline void check_qconfig(const QConfig& q, const std::string& who) {
  for (const ObserverSpec* s : {&q.weight_observer, &q.act_observer}) {
    const QuantDType& d = s->scheme.dtype;
    const std::int64_t lo = d.is_signed ? -128 : 0, hi = d.is_signed ? 127 : 255;
    if (d.quant_min < lo || d.quant_max > hi || d.quant_min >= d.quant_max)
      throw value_error(who + ": the qconfig's range [" + std::to_string(d.quant_min) + ", " +
                        std::to_string(d.quant_max) + "] is not an 8-bit range of " + d.name);
    try {
      (void)s->make();
    } catch (const value_error& e) {
      throw value_error(who + ": the qconfig's observer cannot be made: " + e.what());
    }
  }
}

inline bool is_op(const graph::Expr& e, std::initializer_list<std::string_view> names) {
  if (e.op() == nullptr) return false;
  for (const std::string_view n : names)
    if (e.op()->name == n) return true;
  return false;
}

inline const Module* callee_of(const graph::Expr& e) { return e.is_module_call() ? e.callee() : nullptr; }

template <class M>
const M* callee_as(const graph::Expr& e) {
  return dynamic_cast<const M*>(callee_of(e));
}

/// The relu / relu6 (op or module call) that is n's only user, or nullptr.
inline graph::Expr* folded_activation(const graph::Node* n) {
  if (n->users().size() != 1) return nullptr;
  graph::Expr* u = n->users().front();
  const Module* m = callee_of(*u);
  const bool module_act = m != nullptr && (m->type_name() == "ReLU" || m->type_name() == "ReLU6");
  return module_act || is_op(*u, {"relu", "relu6"}) ? u : nullptr;
}

/// The qualified name without the top graph's name ("ResNet.layer1.0" -> "layer1.0").
inline std::string relative_path(const std::string& qualname) {
  const auto dot = qualname.find('.');
  return dot == std::string::npos ? std::string() : qualname.substr(dot + 1);
}

class Preparer {
 public:
  Preparer(TracedModule& m, const QConfig& q, const PrepareOptions& o) : m_(m), qconfig_(q), options_(o) {}

  /// Observes everything quantizable; returns how many layers (conv2d, linear, add) were.
  std::size_t run() {
    check_qconfig(qconfig_, "quant::prepare");
    for (const auto& [name, q] : options_.module_name)
      if (q) check_qconfig(*q, "quant::prepare (module_name '" + name + "')");
    for (const auto& [name, q] : options_.module_type)
      if (q) check_qconfig(*q, "quant::prepare (module_type '" + name + "')");
    graph::Graph& top = m_.graph();
    for (graph::Graph* g : top.graphs(true)) prepare_graph(*g, g == &top);
    for (graph::Graph* g : top.graphs(true)) g->compile();
    // A conv2d / linear call that replaced a module call takes the module call's output name.
    for (const auto& [node, name] : renamed_)
      if (!node->top_graph()->names().taken(name)) node->set_name(name);
    return layers_;
  }

 private:
  /// The qconfig for a module path and type name (nullopt: float).
  [[nodiscard]] std::optional<QConfig> config_for(std::string path, const std::string& type) const {
    while (true) {
      if (const auto it = options_.module_name.find(path); it != options_.module_name.end()) return it->second;
      if (path.empty()) break;
      const auto dot = path.rfind('.');
      path = dot == std::string::npos ? std::string() : path.substr(0, dot);
    }
    if (const auto it = options_.module_type.find(type); it != options_.module_type.end()) return it->second;
    return qconfig_;
  }

  void prepare_graph(graph::Graph& g, bool top) {
    const Module* owner = g.owner();
    if (owner != nullptr && owner->quantize_disabled()) return;
    const std::string path = relative_path(g.qualname());
    const std::string owner_type = owner != nullptr ? std::string(owner->type_name()) : std::string();
    if (top)
      if (const auto q = config_for(path, owner_type))
        for (graph::Node* in : g.inputs())
          if (in->is_tensor()) observe(g, *in, *q, nullptr);
    std::vector<graph::Expr*> exprs;
    for (const auto& e : g.expr_list_()) exprs.push_back(e.get());
    for (graph::Expr* e : exprs) {
      const Module* callee = callee_of(*e);
      if (callee != nullptr && callee->quantize_disabled()) continue;
      const bool conv_or_linear = callee_as<nn::Conv2d>(*e) != nullptr || callee_as<nn::Linear>(*e) != nullptr ||
                                  is_op(*e, {"conv2d", "linear"});
      const bool add = is_op(*e, {"__add__", "__radd__", "add"}) && e->inputs().size() == 2 &&
                       e->inputs()[0]->is_tensor() && e->inputs()[1]->is_tensor();
      if (!conv_or_linear && !add) continue;
      const std::optional<QConfig> q =
          callee != nullptr ? config_for(relative_path(e->inputs().front()->qualname()), std::string(callee->type_name()))
                            : config_for(path, owner_type);
      if (!q) continue;
      ++layers_;
      graph::Node* out = e->output();
      if (conv_or_linear) out = quantize_weight(g, *e, *q);
      graph::Expr* act = folded_activation(out);
      observe(g, act != nullptr ? *act->output() : *out, *q, act != nullptr ? act : out->expr());
    }
  }

  /// A FakeQuantize attribute of g's module, named after `base`; returns its attribute name.
  std::string attach(graph::Graph& g, const std::string& base, nn::FakeQuantize fq) {
    Module* owner = g.owner();
    if (owner == nullptr) throw graph_error("quant::prepare: the module of " + g.name() + " is not at hand");
    // An identifier: a container child's name ("0") or a dotted path gets one.
    std::string stem = base;
    std::replace(stem.begin(), stem.end(), '.', '_');
    if (stem.empty() || (stem.front() >= '0' && stem.front() <= '9')) stem = "m" + stem;
    std::string name = stem + "_fake_quant";
    for (int k = 1; owner->has_attr(name); ++k) name = stem + "_fake_quant_" + std::to_string(k);
    owner->setattr(name, std::unique_ptr<Module>(std::make_unique<nn::FakeQuantize>(std::move(fq))));
    return name;
  }

  /// Inserts `fq(n)` after `after` and makes n's users read it.
  void observe(graph::Graph& g, graph::Node& n, const QConfig& q, const graph::Expr* after) {
    std::string base = n.name();
    for (const auto& [node, name] : renamed_)
      if (node == &n) base = name;  // the name it will have
    const std::string name = attach(g, base, q.activation());
    graph::Node* y = nullptr;
    {
      auto scope = graph::insert_exprs(g, after);
      y = graph::call(graph::attr(Sym(g.inputs().front()), name), Sym(&n)).node();
    }
    graph::replace_node(g, {{&n, y}});
  }

  /// Fake-quantizes the weight of a conv2d / linear; returns the (new) output of the layer.
  graph::Node* quantize_weight(graph::Graph& g, graph::Expr& e, const QConfig& q) {
    const auto* conv = callee_as<nn::Conv2d>(e);
    const auto* linear = callee_as<nn::Linear>(e);
    graph::Node* out = nullptr;
    if (conv == nullptr && linear == nullptr) {
      graph::Node* w = e.inputs()[1];
      const std::string name = attach(g, w->name(), q.weight());
      graph::Node* wq = nullptr;
      {
        auto scope = graph::insert_exprs(g, w->expr());
        wq = graph::call(graph::attr(Sym(g.inputs().front()), name), Sym(w)).node();
      }
      e.replace_inputs(w, wq);
      return e.output();
    }
    const graph::Expr* module_getattr = e.inputs().front()->expr();
    const std::string path = module_getattr->kind() == graph::ExprKind::get_attr ? module_getattr->name()
                                                                                 : e.inputs().front()->name();
    const std::string name = attach(g, path + "_weight", q.weight());
    {
      auto scope = graph::insert_exprs(g, &e);
      const Sym module(e.inputs().front());
      const Sym x(e.inputs()[1]);
      const Sym wq = graph::call(graph::attr(Sym(g.inputs().front()), name), graph::attr(module, "weight"));
      const bool bias = conv != nullptr ? conv->bias.defined() : linear->bias.defined();
      if (conv != nullptr)
        out = bias ? functional::conv2d(x, wq, graph::attr(module, "bias"), conv->conv_params()).node()
                   : functional::conv2d(x, wq, none, conv->conv_params()).node();
      else
        out = bias ? functional::linear(x, wq, graph::attr(module, "bias")).node() : functional::linear(x, wq).node();
    }
    renamed_.emplace_back(out, e.output()->name());
    graph::replace_node(g, {{e.output(), out}});
    return out;
  }

  TracedModule& m_;
  const QConfig& qconfig_;
  const PrepareOptions& options_;
  std::size_t layers_ = 0;
  std::vector<std::pair<graph::Node*, std::string>> renamed_;
};

}  // namespace detail

/// A copy of `traced` with observers placed (see the file comment); `traced` is left unchanged.
/// Throws value_error naming the graph when nothing is quantizable (nothing would be observed) and
/// for a qconfig that cannot be made.
[[nodiscard]] inline TracedModule prepare(const TracedModule& traced, const QConfig& qconfig,
                                          const PrepareOptions& options = {}) {
  TracedModule m = options.fuse_conv_bn ? tracemod::optimize(traced, {"FuseConvBn"}) : TracedModule(traced);
  if (detail::Preparer(m, qconfig, options).run() == 0)
    throw value_error("quant::prepare: " + traced.graph().name() +
                      " has nothing to quantize: no conv2d, linear or add of two tensors with a qconfig set");
  return m;
}

}  // namespace tracemod::quant
